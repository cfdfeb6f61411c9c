"""torchport.runtime.checkpoint: complete, CPU-only, weights_only-loadable, atomic, keep-last-K."""

from __future__ import annotations

import errno
import os
import warnings
import zipfile

import pytest
import torch

from torchport.runtime import checkpoint as ckpt
from torchport.runtime.amp import Amp
from torchport.runtime.seed import seed_everything
from torchport.train.models import build_model
from torchport.train.optim import LrSchedule


def _setup(seed: int):
    seed_everything(seed)
    model = build_model("tinycnn", num_classes=3, image_size=16)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, LrSchedule(kind="cosine", warmup=2, total=10))
    return model, opt, sched


def _steps(model, opt, sched, n: int) -> list[float]:
    """Training steps whose data and dropout-like noise come from the global RNGs (so RNG restore matters)."""
    import random

    import numpy as np

    losses = []
    for _ in range(n):
        x = torch.randn(4, 3, 16, 16) + float(np.random.rand()) + random.random()
        y = torch.randint(0, 3, (4,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def test_capture_restore_continues_bit_identically(tmp_path):
    model, opt, sched = _setup(0)
    _steps(model, opt, sched, 3)
    path = ckpt.save(ckpt.capture(model=model, optimizer=opt, scheduler=sched, progress={"step": 3},
                                  config={"lr": 0.05}), tmp_path / "c.pt")
    expected = _steps(model, opt, sched, 4)

    model2, opt2, sched2 = _setup(123)                 # different init and RNG position
    progress = ckpt.restore(ckpt.load(path), model=model2, optimizer=opt2, scheduler=sched2)
    assert progress == {"step": 3}
    assert _steps(model2, opt2, sched2, 4) == expected  # exactly equal, not approximately
    for a, b in zip(model.state_dict().values(), model2.state_dict().values()):
        assert torch.equal(a, b)


def test_saved_file_is_cpu_only_and_loads_with_weights_only(tmp_path):
    model, opt, sched = _setup(0)
    _steps(model, opt, sched, 1)
    path = ckpt.save(ckpt.capture(model=model, optimizer=opt, scheduler=sched, config={"x": 1}), tmp_path / "c.pt")
    raw = torch.load(path, weights_only=True)          # no map_location: fails if anything is off-CPU
    assert raw["format"] == ckpt.FORMAT
    assert {"torch", "torchport", "python"} <= set(raw["versions"])
    assert set(raw["rng"]) >= {"python", "numpy", "torch", "devices"}
    assert isinstance(raw["rng"]["numpy"]["keys"], torch.Tensor)   # numpy state stored as a tensor

    def walk(obj):
        if isinstance(obj, torch.Tensor):
            yield obj
        elif isinstance(obj, dict):
            for v in obj.values():
                yield from walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                yield from walk(v)

    tensors = list(walk(raw))
    assert tensors and all(t.device.type == "cpu" for t in tensors)


def test_scaler_state_is_normalised_with_dynamic_key():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        amp = Amp("fp16", scaler=True, init_scale=1024.0)
    state = ckpt.capture(amp=amp, rng=False)
    assert state["scaler"]["dynamic"] is True and state["scaler"]["scale"] == 1024.0

    class NpuLikeScaler:  # torch_npu's scaler keeps `_dynamic` and requires the key on load
        _dynamic = True

        def load_state_dict(self, s):
            self.loaded = s

    class TorchLikeScaler:
        def load_state_dict(self, s):
            self.loaded = s

    npu, plain = NpuLikeScaler(), TorchLikeScaler()
    ckpt.restore(state, scaler=npu, rng=False)
    ckpt.restore(state, scaler=plain, rng=False)
    assert npu.loaded["dynamic"] is True and "dynamic" not in plain.loaded
    # A raw torch GradScaler is normalised on capture too.
    raw = ckpt.capture(scaler=torch.amp.GradScaler("cpu", init_scale=8.0), rng=False)
    assert raw["scaler"]["dynamic"] is True


def test_wrappers_are_unwrapped_so_keys_are_portable():
    model = build_model("tinycnn", num_classes=2, image_size=8)

    class Wrapper(torch.nn.Module):   # stands in for DDP (.module)
        def __init__(self, m):
            super().__init__()
            self.module = m

    state = ckpt.capture(model=Wrapper(model), rng=False)
    assert list(state["model"]) == list(model.state_dict())
    fresh = build_model("tinycnn", num_classes=2, image_size=8)
    ckpt.restore(state, model=Wrapper(fresh), rng=False)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values()))
    with pytest.raises(ckpt.CheckpointError, match="do not fit"):
        ckpt.restore(state, model=build_model("tinycnn", num_classes=5, image_size=8), rng=False)
    with pytest.raises(ckpt.CheckpointError, match="no 'optimizer'"):
        ckpt.restore(state, optimizer=torch.optim.SGD(model.parameters(), lr=1), rng=False)


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    m = ckpt.CheckpointManager(tmp_path, keep_last=2)
    good = m.save({"v": torch.ones(3)}, step=1)
    before = good.read_bytes()

    def disk_full(obj, f, *a, **k):
        f.write(b"partial bytes")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(ckpt.CheckpointWriteError, match="No space left.*intact"):
        m.save({"v": torch.zeros(3)}, step=2)
    monkeypatch.undo()
    assert m.checkpoints() == [good] and good.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [good.name]          # no temp file left behind
    assert torch.equal(ckpt.load(m.latest())["v"], torch.ones(3))


def test_keep_last_and_latest_skips_incomplete_files(tmp_path):
    m = ckpt.CheckpointManager(tmp_path, keep_last=2)
    for step in range(1, 6):
        m.save({"step": step}, step=step)
    assert [p.name for p in m.checkpoints()] == ["ckpt-000000004.pt", "ckpt-000000005.pt"]
    m.path_for(9).write_bytes(b"PK\x03\x04 truncated")          # e.g. copied half-way by a user
    (tmp_path / ".ckpt-000000010.pt.tmp-999").write_bytes(b"junk")  # a killed save's temp file
    with pytest.warns(RuntimeWarning, match="incomplete"):
        assert m.latest() == m.path_for(5)
    assert ckpt.load(m.resolve("auto"))["step"] == 5
    m.save({"step": 11}, step=11)
    assert not (tmp_path / ".ckpt-000000010.pt.tmp-999").exists()  # stale temp files are cleaned


def test_resolve_and_load_errors(tmp_path):
    m = ckpt.CheckpointManager(tmp_path / "none")
    assert m.resolve(None) is None and m.resolve("auto") is None and m.latest() is None
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        m.resolve(tmp_path / "nope.pt")
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        ckpt.load(tmp_path / "nope.pt")
    bad = tmp_path / "garbage.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ckpt.CheckpointError, match="could not be read"):
        ckpt.load(bad)
    assert not zipfile.is_zipfile(bad)
