"""Files from elsewhere are data: a DCP checkpoint's ``.metadata`` and non-tensor items, a ``.pt`` in any torch
format, are read without running any pickle they hold; a refusal is one line naming the file and the global."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchport.runtime.checkpoint import CheckpointError, CheckpointRefusedError
from torchport.runtime.dcp import load_state, read_metadata, save_state

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _hostile  # noqa: E402

TORCH_ADVICE = "weights_only"       # torch's "Re-running torch.load with weights_only set to False will likely succeed"


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3))
    return model, torch.optim.AdamW(model.parameters(), lr=0.05)


@pytest.fixture
def ckpt(tmp_path):
    model, opt = _model()
    model(torch.randn(5, 6)).sum().backward()
    opt.step()
    path = tmp_path / "step-000000001"
    save_state(path, model=model, optimizer=opt, extra={"progress": {"step": 1}})
    return path


def _refused(path, match):
    model, opt = _model()
    with pytest.raises(CheckpointRefusedError, match=match) as info:
        load_state(path, model=model, optimizer=opt)
    text = str(info.value)
    assert "\n" not in text and TORCH_ADVICE not in text
    return text


def test_the_projects_own_checkpoint_loads_through_the_safe_reader(ckpt):
    model, opt = _model()
    assert load_state(ckpt, model=model, optimizer=opt)["progress"] == {"step": 1}
    assert type(read_metadata(ckpt)).__name__ == "Metadata"


def test_a_planted_metadata_pickle_is_refused_before_it_runs(ckpt, tmp_path):
    marker = tmp_path / "ran"
    _hostile.plant_metadata(ckpt, marker)
    text = _refused(ckpt, r"\.metadata' was refused on purpose: it holds the blocked global posix\.system")
    assert str(ckpt) in text and not marker.exists()
    with pytest.raises(CheckpointRefusedError):
        read_metadata(ckpt)
    assert not marker.exists()


def test_a_planted_non_tensor_item_is_refused_and_trust_is_an_explicit_opt_out(ckpt, tmp_path):
    marker = tmp_path / "ran"
    _hostile.plant_item(ckpt, marker)
    _refused(ckpt, r"__9_0\.distcp \(optim\.param_groups\.0\.lr\)' was refused on purpose: .*posix\.system")
    assert not marker.exists()
    model, opt = _model()
    load_state(ckpt, model=model, optimizer=opt, trust=True)   # torch's own reader: runs the planted pickle
    assert marker.exists()                      # so the file really is hostile, and trust really lifts the guard


@pytest.mark.parametrize("name", ["../outside.distcp", "/etc/passwd", "sub/dir.distcp"])
def test_a_shard_named_outside_the_checkpoint_is_refused(ckpt, name):
    _hostile.point_item(ckpt, name)
    _refused(ckpt, "outside its directory")


def test_a_shard_symlinked_out_of_the_checkpoint_is_refused(ckpt, tmp_path):
    shard = next(ckpt.glob("__0_*.distcp"))
    outside = tmp_path / "elsewhere.distcp"
    outside.write_bytes(shard.read_bytes())
    os.symlink(outside, ckpt / "link.distcp")
    _hostile.point_item(ckpt, "link.distcp")
    _refused(ckpt, "symlink leading out of the checkpoint")


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbled"])
def test_a_damaged_metadata_is_one_line_not_an_assertion(ckpt, damage):
    meta = ckpt / ".metadata"
    data = meta.read_bytes()
    meta.write_bytes({"empty": b"", "truncated": data[: len(data) // 2], "garbled": b"\x80\x05garbage"}[damage])
    model, opt = _model()
    with pytest.raises(CheckpointError, match="empty|damaged") as info:
        load_state(ckpt, model=model, optimizer=opt)
    assert "AssertionError" not in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("fmt", ["zip", "legacy", "tar"])
def test_a_hostile_pt_in_every_torch_format_is_refused_without_torchs_advice(tmp_path, fmt):
    import io
    import pickle
    import tarfile

    from torchport.runtime import checkpoint as ckpt_mod

    marker, f = tmp_path / "ran", tmp_path / f"{fmt}.pt"
    evil = {"model": _hostile.Planted(marker)}
    if fmt == "tar":
        with tarfile.open(f, "w") as t:
            for name, obj in (("sys_info", {"protocol_version": 1001, "little_endian": True,
                                            "type_sizes": {"short": 2, "int": 4, "long": 8}}), ("pickle", evil)):
                data = pickle.dumps(obj)
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    else:
        torch.save(evil, f, _use_new_zipfile_serialization=fmt == "zip")
    with pytest.raises(CheckpointRefusedError, match="legacy .tar format" if fmt == "tar" else "posix.system") as info:
        ckpt_mod.load(f)
    assert TORCH_ADVICE not in str(info.value) and not marker.exists()


def test_the_allow_list_refuses_what_dcp_never_writes():
    import pickle

    from torchport.runtime.safe_load import ALLOWED_GLOBALS, restricted_loads

    assert all(not m.startswith(("os", "posix", "subprocess", "builtins.eval")) for m, _ in ALLOWED_GLOBALS)
    assert restricted_loads(pickle.dumps([torch.float16, torch.Size([2, 3]), torch.strided]), name="x") == [
        torch.float16, torch.Size([2, 3]), torch.strided]
    for obj in (eval, getattr, torch.load, pickle.loads):
        with pytest.raises(CheckpointRefusedError, match="blocked global"):
            restricted_loads(pickle.dumps(obj), name="x")


def test_convert_refuses_a_planted_checkpoint_with_one_line_and_exit_5(ckpt, tmp_path):
    marker = tmp_path / "ran"
    _hostile.plant_metadata(ckpt, marker)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run([sys.executable, "-m", "torchport.train.convert", str(ckpt), str(tmp_path / "out.pt")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 5, p.stderr
    assert "Traceback" not in p.stderr and [ln for ln in p.stderr.splitlines() if "error:" in ln] == [
        ln for ln in p.stderr.splitlines() if ln.strip() and "warning" not in ln]
    assert "posix.system" in p.stderr and TORCH_ADVICE not in p.stderr and not marker.exists()
    assert not (tmp_path / "out.pt").exists()


def test_a_full_disk_during_a_sharded_save_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import errno

    from torchport.runtime.checkpoint import CheckpointWriteError
    from torchport.runtime.dcp import DcpCheckpointManager

    model, opt = _model()
    manager = DcpCheckpointManager(tmp_path / "ck", keep_last=2)
    manager.save(step=1, model=model, optimizer=opt, extra={})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(CheckpointWriteError, match=r"failed \(the disk is full\); the latest pointer was not moved"):
        manager.save(step=2, model=model, optimizer=opt, extra={})
    monkeypatch.undo()
    assert manager.latest() == manager.path_for(1)


def test_a_missing_shard_file_is_one_line(ckpt):
    next(ckpt.glob("__0_*.distcp")).unlink()
    model, opt = _model()
    with pytest.raises(CheckpointError, match="a file is missing: __0_0.distcp") as info:
        load_state(ckpt, model=model, optimizer=opt)
    assert "\n" not in str(info.value)


def test_trust_checkpoint_reaches_the_resume_check_for_a_legacy_metadata(tmp_path):
    """``--trust-checkpoint`` lifts the guard on the check before a resume too (explicit path and ``auto``):
    a file you made with a class outside the allow-list is refused by default and accepted with trust."""
    import fractions
    import pickle
    import warnings

    from torchport.runtime.dcp import DcpCheckpointManager

    manager = DcpCheckpointManager(tmp_path / "ckpts", keep_last=2)
    model, opt = _model()
    model(torch.randn(5, 6)).sum().backward()
    opt.step()
    path = manager.save(step=1, model=model, optimizer=opt, extra={"progress": {"step": 1}})
    meta = pickle.loads((Path(path) / ".metadata").read_bytes())      # our own file: plain pickle is fine here
    meta.planner_data = {"note": fractions.Fraction(1, 3)}           # harmless, but not on the allow-list
    (Path(path) / ".metadata").write_bytes(pickle.dumps(meta))
    _hostile.reseal(Path(path))
    with pytest.raises(CheckpointRefusedError, match="fractions"):
        manager.resolve(str(path))
    assert manager.resolve(str(path), trust=True) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)              # "no checkpoint verifies; skipped ..."
        assert manager.resolve("auto") is None
    assert str(manager.resolve("auto", trust=True)).rstrip("/").endswith(Path(path).name)
