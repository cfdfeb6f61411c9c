"""FSDP2 sharding and DCP checkpoints: the in-process units (one process, no process group) and, marked slow,
the multi-process resharding matrix on cpu/gloo (tests/runtime/_fsdp_worker.py, ranks from a forkserver)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from torchport.runtime.checkpoint import CheckpointError, CheckpointIntegrityError
from torchport.runtime.dcp import DcpCheckpointManager, is_dcp_checkpoint, load_state, save_state, verify

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _trained(steps: int = 2):
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return model, opt


# -- FSDP helpers ------------------------------------------------------------------------------------------
def test_amp_maps_to_mixed_precision_policy_only_for_bf16():
    from torchport.runtime.amp import Amp
    from torchport.runtime.device import select_device
    from torchport.runtime.fsdp import mixed_precision_policy

    cpu = select_device("cpu")
    policy = mixed_precision_policy(Amp("bf16", cpu))
    assert policy.param_dtype is torch.bfloat16 and policy.reduce_dtype is torch.float32
    assert mixed_precision_policy(Amp("fp32", cpu)) is None
    assert mixed_precision_policy(None) is None


def test_one_process_is_not_sharded_and_holds_everything():
    from torchport.runtime.fsdp import gradient_sync, is_sharded, shard_model, state_bytes

    model, opt = _trained()
    assert shard_model(model) is model and not is_sharded(model)
    with gradient_sync(model, False):          # a no-op for a plain module
        pass
    n = sum(p.numel() for p in model.parameters()) * 4
    assert state_bytes(model, opt) == {"params": n, "optimizer": 2 * n, "total": 3 * n}   # AdamW: exp_avg(_sq)


# -- DCP checkpoints in one process --------------------------------------------------------------------------
def test_dcp_round_trip_restores_model_optimizer_and_extra(tmp_path):
    model, opt = _trained()
    path = tmp_path / "step-000000002"
    save_state(path, model=model, optimizer=opt, extra={"progress": {"step": 2}})
    assert is_dcp_checkpoint(path) and {"manifest.json", "torchport.pt", ".metadata"} <= {p.name for p in path.iterdir()}
    verify(path)

    fresh = _model()
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.05)
    extra = load_state(path, model=fresh, optimizer=fresh_opt)
    assert extra["progress"] == {"step": 2}
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    sa, sb = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert all(torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"]) for i in sa)


def test_a_damaged_shard_fails_its_checksum_and_latest_falls_back(tmp_path):
    manager = DcpCheckpointManager(tmp_path / "ck", keep_last=3)
    model, opt = _trained()
    manager.save(step=1, model=model, optimizer=opt, extra={"progress": {"step": 1}})
    manager.save(step=2, model=model, optimizer=opt, extra={"progress": {"step": 2}})
    assert json.loads((tmp_path / "ck" / "latest.json").read_text())["step"] == 2
    assert manager.latest() == manager.path_for(2)

    shard = next(manager.path_for(2).glob("*.distcp"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointIntegrityError, match="fails its checksum"):
        verify(manager.path_for(2))
    with pytest.warns(RuntimeWarning, match="falling back to checkpoint .*step-000000001"):
        assert manager.latest() == manager.path_for(1)
    with pytest.raises(CheckpointIntegrityError):
        manager.resolve(manager.path_for(2))      # an explicit --resume PATH is verified too


def test_an_interrupted_save_is_not_a_checkpoint_and_keep_last_prunes(tmp_path):
    manager = DcpCheckpointManager(tmp_path / "ck", keep_last=2)
    model, opt = _trained()
    for step in (1, 2, 3):
        manager.save(step=step, model=model, optimizer=opt, extra={"progress": {"step": step}})
    assert [p.name for p in manager.checkpoints()] == ["step-000000002", "step-000000003"]
    # A save killed before its manifest: files but no manifest, newer than the commit -> ignored.
    half = manager.path_for(4)
    half.mkdir()
    (half / "__0_0.distcp").write_bytes(b"partial")
    assert manager.latest() == manager.path_for(3)
    with pytest.raises(CheckpointError, match="not a sharded"):
        manager.resolve(half)
    # Nothing committed yet (no latest.json): a lone directory is not a checkpoint either.
    empty = DcpCheckpointManager(tmp_path / "fresh")
    save_state(empty.path_for(5), model=model, optimizer=opt, extra={})
    assert empty.latest() is None


def test_a_failed_pointer_write_keeps_the_previous_latest_and_leaves_no_temp_file(tmp_path, monkeypatch):
    from torchport.runtime.checkpoint import CheckpointWriteError

    manager = DcpCheckpointManager(tmp_path / "ck", keep_last=3)
    model, opt = _trained()
    manager.save(step=1, model=model, optimizer=opt, extra={})
    before = (tmp_path / "ck" / "latest.json").read_bytes()

    real_replace = os.replace

    def full_disk(src, dst):                         # the temp pointer is written, its rename fails
        if str(dst).endswith("latest.json"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(CheckpointWriteError, match="previous checkpoint stays the latest"):
        manager.save(step=2, model=model, optimizer=opt, extra={})
    monkeypatch.undo()
    assert (tmp_path / "ck" / "latest.json").read_bytes() == before
    assert manager.latest() == manager.path_for(1)
    assert not [p.name for p in (tmp_path / "ck").iterdir() if ".tmp-" in p.name]


def test_convert_file_to_dcp_and_back_is_lossless(tmp_path):
    """The DDP <-> FSDP conversion of a trainer checkpoint (python -m torchport.train.convert) keeps every tensor."""
    from torchport.models import build_model
    from torchport.runtime import checkpoint as ckpt
    from torchport.train.config import TrainConfig
    from torchport.train.convert import convert_checkpoint
    from torchport.train.optim import build_optimizer

    cfg = TrainConfig(model="tinycnn", image_size=16, num_classes=4, optimizer="adamw")
    torch.manual_seed(0)
    model = build_model("tinycnn", num_classes=4, image_size=16)
    opt = build_optimizer(model, name="adamw", lr=0.01, momentum=0.9, weight_decay=0.05)
    model(torch.randn(2, 3, 16, 16)).sum().backward()
    opt.step()
    src = ckpt.save(ckpt.capture(model=model, optimizer=opt, progress={"step": 1}, config=cfg.to_dict()),
                    tmp_path / "ckpt-000000001.pt")

    convert_checkpoint(src, tmp_path / "step-000000001")
    verify(tmp_path / "step-000000001")
    back = convert_checkpoint(tmp_path / "step-000000001", tmp_path / "back.pt")
    a, b = ckpt.load(src), ckpt.load(back)
    assert a["progress"] == b["progress"] and a["config"] == b["config"]
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["optimizer"]["param_groups"] == b["optimizer"]["param_groups"]
    for i, s in a["optimizer"]["state"].items():
        assert all(torch.equal(v, b["optimizer"]["state"][i][k]) for k, v in s.items())


def test_convert_refuses_what_is_not_a_trainer_checkpoint(tmp_path):
    from torchport.train.convert import convert_checkpoint

    torch.save({"weights": torch.ones(2)}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="not a torchport trainer checkpoint"):
        convert_checkpoint(tmp_path / "x.pt", tmp_path / "out")


# -- many processes (cpu/gloo): resharding N -> M ----------------------------------------------------------------
def _launch(world: int, out: Path, *args: str) -> dict[int, dict]:
    """Run the worker as ``world`` ranks (gloo on cpu); ``{rank: its result}``."""
    import multiprocessing
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import _fsdp_worker

    # A forkserver that imported torch once forks every rank: no start-up cost per rank, and no fork of this
    # process (autograd's threads do not survive a fork).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed.checkpoint", "torchport.runtime.dcp", "_fsdp_worker"])
    procs = [ctx.Process(target=_fsdp_worker.forked, args=(r, world, port, [*args, "--out", str(out)]))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    for p in procs:
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in procs] == [0] * world, f"ranks exited with {[p.exitcode for p in procs]}"
    results = {r: json.loads(Path(f"{out}.{r}").read_text()) for r in range(world)}
    return {r: {**v, "losses": {int(k): x for k, x in v["losses"].items()}} for r, v in results.items()}


#: Loss agreement between world sizes: the same global batch, only the reduction order differs (float32).
RESHARD_ATOL = 1e-5


@pytest.mark.slow
def test_resharding_matrix_follows_the_uninterrupted_trajectory(tmp_path):
    """Saved on 2 ranks -> resumed on 1 and 3; saved on 1 -> resumed on 2: every resumed loss matches the
    uninterrupted single-process run within RESHARD_ATOL; sharding splits params + optimizer state ~1/N."""
    ref = _launch(1, tmp_path / "ref", "--to-step", "8", "--save-at", "4", "--ckpt", str(tmp_path / "ck1"))[0]
    two = _launch(2, tmp_path / "two", "--to-step", "8", "--save-at", "4", "--ckpt", str(tmp_path / "ck2"))
    assert two[0]["losses"] == pytest.approx(ref["losses"], abs=RESHARD_ATOL)     # uninterrupted 2 == 1
    assert two[0]["bytes"]["total"] <= 0.6 * ref["bytes"]["total"]                   # ~1/2 per rank
    saved2, saved1 = str(tmp_path / "ck2" / "step-000000004"), str(tmp_path / "ck1" / "step-000000004")
    for world, saved in ((1, saved2), (3, saved2), (2, saved1)):
        got = _launch(world, tmp_path / f"r{world}", "--from-step", "4", "--to-step", "8", "--resume", saved)
        assert sorted(got[0]["losses"]) == [4, 5, 6, 7]
        assert got[0]["losses"] == pytest.approx({s: ref["losses"][s] for s in range(4, 8)}, abs=RESHARD_ATOL), (world, saved)
        assert got[0]["checksum"] == pytest.approx(ref["checksum"], abs=1e-4)
        assert len({json.dumps(r["losses"]) for r in got.values()}) == 1            # every rank agrees
