"""A trainer rank that exits: the others stop with one clear error (exit 8), no hang; the collective
timeout is configurable (TORCHPORT_COLLECTIVE_TIMEOUT_S)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from torchport.errors import ConfigError
from train_helpers import FAULT_TRAIN


def test_collective_timeout_is_configurable(monkeypatch):
    from torchport.runtime.distributed import collective_timeout

    monkeypatch.delenv("TORCHPORT_COLLECTIVE_TIMEOUT_S", raising=False)
    assert collective_timeout().total_seconds() == 600
    monkeypatch.setenv("TORCHPORT_COLLECTIVE_TIMEOUT_S", "12.5")
    assert collective_timeout().total_seconds() == 12.5
    for bad in ("0", "-3", "soon"):
        monkeypatch.setenv("TORCHPORT_COLLECTIVE_TIMEOUT_S", bad)
        with pytest.raises(ConfigError, match="TORCHPORT_COLLECTIVE_TIMEOUT_S"):
            collective_timeout()


def test_peer_failures_become_one_distributed_error(monkeypatch):
    from torchport.errors import ExitCode
    from torchport.runtime.distributed import collective_failure

    exc = RuntimeError("[/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
                       "[127.0.0.1]:6: Connection reset by peer.")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert collective_failure(exc) is None                       # not distributed: not ours to explain
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    err = collective_failure(exc)
    assert err is not None and err.exit_code == ExitCode.DISTRIBUTED
    assert "another rank stopped" in str(err) and "pair.cc" not in str(err)
    assert collective_failure(RuntimeError("CUDA out of memory")) is None


@pytest.mark.slow
def test_a_rank_that_exits_stops_the_others_without_a_hang(tiny_data, tmp_path, env):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           FAULT_TRAIN, "--data", str(tiny_data), "--epochs", "3", "--batch-size", "8",
           "--image-size", "16", "--model", "tinycnn", "--device", "cpu", "--workers", "0", "--log-every", "1",
           "--run-dir", str(tmp_path / "run"), "--progress", "plain"]
    t0 = time.monotonic()
    out = subprocess.run(cmd, env={**env, "TORCHPORT_FAULT_EXIT": "1:1", "TORCHPORT_COLLECTIVE_TIMEOUT_S": "30"},
                         capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert time.monotonic() - t0 < 120, "the surviving rank waited too long"
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "exitcode: 3" in text and "local_rank: 1" in text, text[-3000:]        # torchrun names the dead rank
    survivor = [ln for ln in text.splitlines() if ln.startswith("torchport train: error: rank 0")]
    # rank 0 either reports the failed collective in one line, or was stopped by the launcher first
    assert survivor or "Sending process" in text, text[-3000:]
    if survivor:
        assert "another rank stopped" in survivor[0]
    assert "Traceback (most recent call last):\n  File" not in out.stdout
