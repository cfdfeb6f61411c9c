"""Determinism guard: the same seed and thread count give bit-identical losses and final weights, whatever
the loader does around the training.

One reference run (tinycnn, 16 px, batch 8, 12 steps, fp32, 1 thread, no workers, cpu), then one case each:
2 DataLoader workers; pinned host memory on and off (the emulated npu: its fp32 is the CPU's bits and it
pins through its host allocator -- a CPU-only host cannot pin at all); stopped mid-epoch and resumed from
the checkpoint (SIGTERM mid-epoch, as `timeout` sends it); a busy process beside it. Every case must match the reference in every step's loss and
in the SHA-256 of its final weights. What the thread count changes is measured by
``tools/determinism_matrix.py`` and written up in docs/train.md (Determinism).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys

import pytest
import torch
from train_helpers import step_losses

from torchport.train import TrainConfig, train

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # "no accelerator: running on CPU"


def weights_sha(checkpoint: str) -> str:
    """SHA-256 of a checkpoint's model tensors (names, dtypes, shapes and bytes, in name order)."""
    state = torch.load(checkpoint, weights_only=True)["model"]
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield 1
    torch.set_num_threads(before)


def _cfg(data, run_dir, **kw) -> TrainConfig:
    base = dict(data=str(data), model="tinycnn", image_size=16, batch_size=8, lr=0.02, epochs=1, workers=0,
                warmup_epochs=0, precision="fp32", log_every=1, checkpoint_every=4, progress="none",
                device="cpu", run_dir=str(run_dir))
    return TrainConfig(**{**base, **kw})


def _outcome(result, run_dir) -> tuple[dict[int, float], str]:
    return step_losses(run_dir), weights_sha(result.last_checkpoint)


@pytest.fixture(scope="module")
def reference(tiny_data, tmp_path_factory, one_thread):
    run_dir = tmp_path_factory.mktemp("ref") / "run"
    losses, sha = _outcome(train(_cfg(tiny_data, run_dir)), run_dir)
    assert sorted(losses) == list(range(1, 13))
    return losses, sha


def test_two_workers_match(reference, tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    assert _outcome(train(_cfg(tiny_data, run_dir, workers=2)), run_dir) == reference


def test_resumed_mid_epoch_matches(reference, tiny_data, tmp_path):
    from torchport.train.stop import Terminated

    run_dir = tmp_path / "run"
    cfg = _cfg(tiny_data, run_dir, workers=2)

    def sigterm_at_step_6(**kw):   # as `timeout` or Kubernetes would: the run saves mid-epoch and stops
        if kw["step"] == 6:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Terminated):
        train(cfg, callbacks=[sigterm_at_step_6])
    assert 6 <= max(step_losses(run_dir)) < 12
    resumed = train(dataclasses.replace(cfg, resume="auto"))
    assert resumed.resumed_from and _outcome(resumed, run_dir) == reference


def test_a_cpu_hog_beside_it_changes_nothing(reference, tiny_data, tmp_path):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])]   # a busy core beside a 1-thread run
    try:
        run_dir = tmp_path / "run"
        outcome = _outcome(train(_cfg(tiny_data, run_dir)), run_dir)
    finally:
        for p in hogs:
            p.kill()
            p.wait()
    assert outcome == reference


@pytest.mark.parametrize("pin", [True, False], ids=["pinned", "not-pinned"])
def test_pinned_memory_on_and_off_match(reference, tiny_data, tmp_path, emulated_npu, monkeypatch, pin):
    from torch.utils.data._utils import pin_memory as torch_pin

    from torchport.backends import registry
    from torchport.runtime import device as runtime_device

    spec = registry.get("npu")
    assert spec.pin_memory   # the npu's policy pins; the other case turns it off
    if not pin:
        monkeypatch.setitem(registry._REGISTRY, "npu", dataclasses.replace(spec, pin_memory=False))
    # a selection cached by an earlier test (another backend record, another target) must not decide pinning,
    # and this test's selection (with the replaced record) must not outlive it
    monkeypatch.setattr(runtime_device, "_current", None)
    pinned = []
    real = torch_pin.pin_memory
    monkeypatch.setattr(torch_pin, "pin_memory", lambda data, device=None: pinned.append(1) or real(data, device))
    run_dir = tmp_path / "run"
    outcome = _outcome(train(_cfg(tiny_data, run_dir, device="npu", workers=2)), run_dir)
    assert bool(pinned) is pin          # the DataLoader really pinned (or really did not)
    assert outcome == reference         # and the emulated npu's fp32 run is the cpu run, bit for bit
