"""Issue 36, item 5: the sharded (FSDP/DCP) path fails like the single-file one -- one ``error:`` line for the
run (not one per rank), a documented exit code, and the previous committed checkpoint kept and picked by
``--resume auto``. Two real ranks (gloo on cpu, tests/train/fault_train.py's faults) for a full disk during a
save and an explicit resume of a damaged checkpoint; the damage forms themselves in one process. The probes
(``tools/probes.py -k sharded``) run every form, with a real tmpfs, a dying S3 endpoint and a killed rank."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

import _hostile  # noqa: E402
from bad_inputs import probe_helpers  # noqa: E402

from torchport.runtime.checkpoint import CheckpointError  # noqa: E402

P = probe_helpers()


def _errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "error:" in ln]


@pytest.mark.slow
def test_a_full_disk_during_a_two_rank_save_is_one_line_and_resume_auto_takes_the_step_before(tmp_path):
    ck = tmp_path / "ck"
    r, codes = P.sharded_run(tmp_path, ck, extra_env={"TORCHPORT_FAULT_ENOSPC": "1:2"})
    assert codes == [5, 5], r.text[-3000:]
    assert "Traceback" not in r.text, r.text[-3000:]
    lines = _errors(r.text)
    assert len(lines) == 1 and "disk is full" in lines[0] and "earlier checkpoints are intact" in lines[0], lines
    assert sorted(p.name for p in ck.glob("step-*") if (p / "manifest.json").exists()) == ["step-000000001"]

    why, resumed = P.auto_resumes_from(tmp_path, ck, "step-000000001")
    assert why is None, why + resumed.text[-2000:]

    # an explicit --resume of a damaged checkpoint (manifest re-sealed over an empty .metadata): one line, exit 5
    latest = sorted(ck.glob("step-*"))[-1]
    (latest / ".metadata").write_bytes(b"")
    _hostile.reseal(latest)
    r, codes = P.ranks(["--data", tmp_path / "data", *P.SHARDED, "--epochs", "3", "--run-dir", tmp_path / "again",
                        "--resume", latest], cwd=tmp_path)
    assert codes == [5, 5] and "Traceback" not in r.text, r.text[-3000:]
    lines = _errors(r.text)
    assert len(lines) == 1 and ".metadata" in lines[0] and "rank 1" not in lines[0], lines

    # ... and of one whose torchport.pt (read by every rank) is a planted pickle: refused once for the run
    previous = sorted(ck.glob("step-*"))[-2]
    torch.save({"planted": _hostile.Planted(tmp_path / "ran")}, previous / "torchport.pt")
    _hostile.reseal(previous)
    r, codes = P.ranks(["--data", tmp_path / "data", *P.SHARDED, "--epochs", "3", "--run-dir", tmp_path / "third",
                        "--resume", previous], cwd=tmp_path)
    assert codes == [5, 5] and "Traceback" not in r.text and not (tmp_path / "ran").exists(), r.text[-3000:]
    lines = _errors(r.text)
    assert len(lines) == 1 and "torchport.pt" in lines[0] and "refused" in lines[0], lines


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 6)).sum().backward()
    opt.step()
    return model, opt


def _shard(p: Path) -> Path:
    return next(p.glob("__0_*.distcp"))


_DAMAGE = {
    "missing-shard": lambda p: _shard(p).unlink(),
    "truncated-shard": lambda p: _shard(p).write_bytes(_shard(p).read_bytes()[:200]),
    "empty-metadata": lambda p: (p / ".metadata").write_bytes(b""),
    "truncated-metadata": lambda p: (p / ".metadata").write_bytes((p / ".metadata").read_bytes()[:100]),
    "garbled-metadata": lambda p: (p / ".metadata").write_bytes(b"\x80\x05garbage" + (p / ".metadata").read_bytes()[40:]),
}


@pytest.mark.parametrize("form", sorted(_DAMAGE))
@pytest.mark.parametrize("sealed", [False, True], ids=["manifest-stale", "manifest-resealed"])
def test_a_damaged_latest_is_one_line_and_latest_falls_back_even_under_a_resealed_manifest(tmp_path, form, sealed):
    from torchport.runtime.dcp import DcpCheckpointManager, verify

    model, opt = _model()
    manager = DcpCheckpointManager(tmp_path / "ck", keep_last=3)
    for step in (1, 2):
        manager.save(step=step, model=model, optimizer=opt, extra={"progress": {"step": step}})
    latest = manager.path_for(2)
    _DAMAGE[form](latest)
    if sealed:
        _hostile.reseal(latest)      # whoever damaged it also rewrote manifest.json: the checksums agree
    with pytest.raises(CheckpointError) as info:
        verify(latest)
    assert "\n" not in str(info.value) and str(latest) in str(info.value)
    with pytest.warns(RuntimeWarning, match="falling back"):
        assert manager.latest() == manager.path_for(1)


def test_a_failed_rank_0_step_of_a_save_is_shared_not_left_to_a_barrier(tmp_path, monkeypatch):
    """rank 0's own part of a save (removing a half-written attempt, moving latest.json) failing -- an S3 endpoint
    gone -- is one CheckpointWriteError every rank raises (marked for one line), not a StorageError on rank 0
    while the others wait in a barrier."""
    from torchport.errors import StorageError, raised_on_every_rank
    from torchport.runtime.checkpoint import CheckpointWriteError
    from torchport.runtime.dcp import DcpCheckpointManager
    from torchport.storage import fs

    model, opt = _model()
    manager = DcpCheckpointManager(tmp_path / "ck", keep_last=3)
    manager.save(step=1, model=model, optimizer=opt, extra={})

    def gone(*a, **k):
        raise StorageError("cannot reach the object store at http://127.0.0.1:9 for s3://b/ck; check the endpoint")

    for target in ("remove_tree", "write_atomic"):
        with monkeypatch.context() as m:
            m.setattr(fs, target, gone)
            with pytest.raises(CheckpointWriteError, match="cannot reach the object store") as info:
                manager.save(step=2, model=model, optimizer=opt, extra={})
        assert raised_on_every_rank(info.value) and "\n" not in str(info.value)
        assert manager.latest() == manager.path_for(1)
        shutil.rmtree(manager.path_for(2), ignore_errors=True)


@pytest.mark.parametrize("rank,marked,expect", [
    ("0", True, "torchport train: error: checkpoint x failed"),
    ("1", True, ""),                                             # the same error: printed once, by rank 0
    ("1", False, "torchport train: error: rank 1: checkpoint x failed"),
])
def test_an_error_every_rank_raises_is_printed_once_for_the_run(monkeypatch, capsys, rank, marked, expect):
    import typer

    from torchport.cli._common import guard
    from torchport.errors import on_every_rank

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", rank)
    err = CheckpointError("checkpoint x failed")
    with pytest.raises(typer.Exit) as info:
        with guard("train"):
            raise on_every_rank(err) if marked else err
    assert info.value.exit_code == 5
    assert capsys.readouterr().err.strip() == expect


def test_a_fault_on_some_ranks_names_the_first_one(monkeypatch):
    """Whose disk is full: the run's one line names the failing rank when not every rank failed."""
    import errno

    from torchport.runtime import dcp, distributed

    monkeypatch.setattr(distributed, "world_size", lambda: 4)
    full = OSError(errno.ENOSPC, "No space left on device")
    assert "(the disk is full, on rank 2)" in dcp._fault_line("P", "write", full, ranks=[2])
    assert "(the disk is full, on rank 1 and 2 more)" in dcp._fault_line("P", "write", full, ranks=[1, 2, 3])
    assert "(the disk is full)" in dcp._fault_line("P", "write", full, ranks=[0, 1, 2, 3])   # every rank: no name


@pytest.mark.parametrize("mine, failed, marked, says", [
    (True, 0.5, False, "damaged"),            # only this rank failed: its own line, with its rank (unmarked)
    (False, 0.5, True, "on another rank"),    # another rank failed: the run's line, printed by rank 0
    (True, 1.0, True, "damaged"),             # every rank failed alike: the run's one line
])
def test_a_load_failure_on_some_ranks_keeps_the_failing_ranks_own_reason(monkeypatch, mine, failed, marked, says):
    from torchport.errors import raised_on_every_rank
    from torchport.runtime import dcp, distributed
    from torchport.runtime.checkpoint import CheckpointError

    monkeypatch.setattr(distributed, "all_reduce_mean", lambda value, target=None: failed if value else failed)
    error = CheckpointError("checkpoint P/torchport.pt is damaged") if mine else None
    first = (lambda: CheckpointError(str(error))) if error is not None else None
    with pytest.raises(CheckpointError, match=says) as info:
        dcp._agree(error, first or (lambda: CheckpointError("P: could not be loaded on another rank")), own=first)
    assert raised_on_every_rank(info.value) is marked
