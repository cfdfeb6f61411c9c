"""Issue 36: in a distributed run each rank's failure is one line that names the rank (``rank 1: ...``), and a
rank started with ``WORLD_SIZE`` but without torchrun's rendezvous variables fails in one line, not a
``ValueError`` traceback from torch's ``env://`` rendezvous."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torchport.cli._common import error_line


@pytest.mark.parametrize("world,rank,message,expect", [
    ("2", "1", "cannot write /x: No space left", "torchport train: error: rank 1: cannot write /x: No space left"),
    ("2", "0", "rank 0: a collective failed", "torchport train: error: rank 0: a collective failed"),   # not twice
    ("1", "0", "cannot write /x", "torchport train: error: cannot write /x"),                          # one process
    (None, None, "bad", "torchport train: error: bad"),
])
def test_an_error_line_names_the_rank_in_a_distributed_run(monkeypatch, capsys, world, rank, message, expect):
    for name, value in (("WORLD_SIZE", world), ("RANK", rank)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    error_line("train", message)
    assert capsys.readouterr().err.strip() == expect


def test_a_rank_without_rendezvous_variables_fails_in_one_line_naming_its_rank(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    env.update(WORLD_SIZE="2", RANK="1", LOCAL_RANK="1", PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-m", "torchport", "train", "--data", str(tmp_path / "none"), "--device", "cpu",
                        "--max-steps", "1", "--run-dir", str(tmp_path / "run")],
                       capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "MASTER_ADDR expected" not in p.stderr, p.stderr[-2000:]
    errors = [ln for ln in p.stderr.splitlines() if ": error: " in ln]
    assert errors == [errors[0]] and errors[0].startswith("torchport train: error: rank 1: WORLD_SIZE=2 is set but "
                                                          "MASTER_ADDR and MASTER_PORT are not"), p.stderr
