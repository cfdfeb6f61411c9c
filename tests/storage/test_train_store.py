"""End to end against the real S3 server: train from s3:// shards, checkpoint to s3://, SIGKILL, --resume auto,
2 ranks under torchrun -- losses identical to the same run from local disk. Plus the checkpoint commit rule."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchport.train.metrics import read_jsonl

TINY = ["--model", "tinycnn", "--image-size", "32", "--batch-size", "8", "--lr", "0.02", "--warmup-epochs", "0",
        "--progress", "plain", "--epochs", "1", "--log-every", "1", "--data-order", "shards"]


def _losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_jsonl(Path(run_dir) / "metrics.jsonl", "step")}


@pytest.fixture
def packed(tmp_path, store_env):
    """The same ImageFolder packed to local disk and to the store; returns (local dir, URL)."""
    from torchport.data.pack import pack_splits
    from torchport.data.synth import make_dataset

    src = tmp_path / "src"
    make_dataset(src, classes=4, train_per_class=24, val_per_class=8, size=32)
    pack_splits(src, tmp_path / "shards", mode="jpeg", workers=1, shard_bytes=32 << 10)
    url = store_env + "/data"
    pack_splits(src, url, mode="jpeg", workers=1, shard_bytes=32 << 10)
    return tmp_path / "shards", url


def _env(tmp_path):
    e = {k: v for k, v in os.environ.items() if k not in ("TORCHPORT_DEVICE", "TORCHPORT_EMULATE")}
    e.update(TORCHPORT_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return e


def _train(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "torchport", "train", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_train_from_store_kill_resume_auto_matches_local_disk(packed, tmp_path, store_env):
    local, url = packed
    env = _env(tmp_path)
    common = [*TINY, "--workers", "2", "--checkpoint-every", "4"]
    ref = _train("--data", local, *common, "--run-dir", tmp_path / "ref", env=env)
    assert ref.returncode == 0, ref.stderr
    expected = _losses(tmp_path / "ref")
    assert sorted(expected) == list(range(1, 13))

    ck = store_env + "/runs/a/checkpoints"
    args = ["--data", url, *common, "--run-dir", tmp_path / "store", "--checkpoint-dir", ck]
    fault_train = Path(__file__).parents[1] / "train" / "fault_train.py"    # torchport train + test faults
    proc = subprocess.Popen([sys.executable, str(fault_train), *map(str, args)],
                            env={**env, "TORCHPORT_FAULT_STEP_DELAY_S": "0.3"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    t0, reached = time.time(), False
    try:
        while time.time() - t0 < 240 and proc.poll() is None:
            m = tmp_path / "store" / "metrics.jsonl"
            if m.exists() and max(_losses(tmp_path / "store"), default=0) >= 6:
                reached = True
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert reached, proc.stderr.read()[-2000:]
    from torchport.runtime import checkpoint as ckpt

    manager = ckpt.CheckpointManager(ck)
    assert manager.latest() == ck + "/ckpt-000000004.pt"
    resumed = _train(*args, "--resume", "auto", env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from " + ck + "/ckpt-000000004.pt" in resumed.stdout
    assert _losses(tmp_path / "store") == expected  # every step, exactly as from local disk
    assert manager.latest() == ck + "/ckpt-000000012.pt"
    # without --resume the used checkpoint dir is refused (two runs would mix)
    from torchport.errors import ConfigError
    from torchport.train.config import TrainConfig
    from torchport.train.rundir import _decide

    with pytest.raises(ConfigError, match="--resume auto"):
        _decide(TrainConfig(data=url, run_dir=str(tmp_path / "other"), checkpoint_dir=ck))


def test_two_ranks_torchrun_from_store_match_local(packed, tmp_path, store_env):
    local, url = packed
    env = _env(tmp_path)
    tr = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "torchport", "train"]
    common = [*TINY, "--workers", "0", "--checkpoint-every", "4"]
    a = subprocess.run([*tr, "--data", str(local), *common, "--run-dir", str(tmp_path / "l")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert a.returncode == 0, a.stderr[-3000:]
    ck = store_env + "/runs/ddp"
    b = subprocess.run([*tr, "--data", url, *common, "--run-dir", str(tmp_path / "s"), "--checkpoint-dir", ck], env=env,
                       capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stderr[-3000:]
    la, lb = _losses(tmp_path / "l"), _losses(tmp_path / "s")
    assert len(la) == 6 and la == lb
    from torchport.runtime import checkpoint as ckpt

    assert ckpt.CheckpointManager(ck).latest() == ck + "/ckpt-000000006.pt"
    assert ckpt.load(ck + "/ckpt-000000006.pt")["progress"]["step"] == 6


_SAVER = """
import sys, torch
from torchport.runtime import checkpoint as ckpt
m = ckpt.CheckpointManager(sys.argv[1], keep_last=2)
m.save({"w": torch.ones(3), "progress": {"step": 1}}, step=1)
print("saved 1", flush=True)
m.save({"w": torch.full((3,), 2.0), "progress": {"step": 2}}, step=2)
print("saved 2", flush=True)
"""


def test_kill_before_pointer_moves_keeps_previous_latest(tmp_path, store_env):
    """The step-2 object is complete but the kill lands before the pointer: resume must take step 1."""
    from torchport.runtime import checkpoint as ckpt
    from torchport.storage import store

    ck = store_env + "/ck"
    env = {**os.environ, "TORCHPORT_CHECKPOINT_TEST_DELAY_S": "3"}
    proc = subprocess.Popen([sys.executable, "-c", _SAVER, ck], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        t0 = time.time()
        while time.time() - t0 < 60 and not store.exists(ck + "/ckpt-000000002.pt"):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert store.exists(ck + "/ckpt-000000002.pt"), proc.stderr.read()
    m = ckpt.CheckpointManager(ck)
    assert m.latest() == ck + "/ckpt-000000001.pt" and m.resolve("auto") == m.latest()
    assert float(ckpt.load(m.latest())["w"][0]) == 1.0
    # the next save commits normally and prunes to keep_last (never the pointer's target)
    m2 = ckpt.CheckpointManager(ck, keep_last=1)
    m2.save({"w": __import__("torch").zeros(1)}, step=3)
    assert m2.latest() == ck + "/ckpt-000000003.pt"
    assert [u.rsplit("/", 1)[1] for u in m2.checkpoints()] == ["ckpt-000000003.pt"]
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        ckpt.load(ck + "/ckpt-000000099.pt")
