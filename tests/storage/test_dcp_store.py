"""Sharded (DCP) checkpoints in an object store (moto's S3 server): written through DCP's fsspec writer on
torchport's configured client, committed by latest.json, verified on load, resumed by the trainer."""

from __future__ import annotations

import pytest
import torch

from torchport.runtime.checkpoint import CheckpointIntegrityError
from torchport.runtime.dcp import DcpCheckpointManager, verify


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def test_dcp_checkpoint_round_trips_through_s3_and_a_damaged_object_is_caught(store_env):
    from torchport.storage import store

    url = store_env + "/runs/a/ck"
    manager = DcpCheckpointManager(url, keep_last=2)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 6)).sum().backward()
    opt.step()
    manager.save(step=1, model=model, optimizer=opt, extra={"progress": {"step": 1}})
    manager.save(step=2, model=model, optimizer=opt, extra={"progress": {"step": 2}})
    assert manager.latest() == f"{url}/step-000000002"
    assert {"latest.json", "step-000000001", "step-000000002"} <= set(store.listdir(url))

    fresh = _model()
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    assert manager.load(manager.latest(), model=fresh, optimizer=fresh_opt)["step"] == 2
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))

    shard = next(n for n in store.listdir(f"{url}/step-000000002") if n.endswith(".distcp"))
    data = bytearray(store.read_bytes(f"{url}/step-000000002/{shard}"))
    data[-1] ^= 0xFF
    store.write_bytes(f"{url}/step-000000002/{shard}", bytes(data))
    with pytest.raises(CheckpointIntegrityError):
        verify(f"{url}/step-000000002")
    with pytest.warns(RuntimeWarning, match="falling back"):
        assert manager.latest() == f"{url}/step-000000001"


def test_trainer_fsdp_checkpoints_in_s3_resume_like_an_uninterrupted_run(store_env, tmp_path):
    """The same DCP checkpoint written to and resumed from the S3 server gives the uninterrupted losses."""
    from torchport.data.synth import make_dataset
    from torchport.train import TrainConfig, train
    from torchport.train.metrics import read_jsonl

    data = tmp_path / "shapes"
    make_dataset(data, classes=4, train_per_class=12, val_per_class=4, size=16)
    base = dict(data=str(data), model="tinycnn", image_size=16, batch_size=8, lr=0.02, warmup_epochs=0.0, epochs=2,
                workers=0, progress="none", log_every=1, device="cpu", precision="fp32", schedule="constant",
                strategy="fsdp", checkpoint_every=2)

    def losses(run_dir):
        return {r["step"]: r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl", "step")}

    train(TrainConfig(**base, run_dir=str(tmp_path / "ref")))
    ck = store_env + "/runs/fsdp/checkpoints"
    train(TrainConfig(**base, run_dir=str(tmp_path / "s3"), checkpoint_dir=ck, max_steps=8))
    resumed = train(TrainConfig(**base, run_dir=str(tmp_path / "s3"), checkpoint_dir=ck, resume="auto"))
    assert resumed.resumed_from == ck + "/step-000000008"
    assert losses(tmp_path / "s3") == losses(tmp_path / "ref")


def test_a_planted_pickle_in_the_store_is_refused_before_it_runs(store_env, tmp_path):
    """The same hostile checkpoint in the object store (.metadata, then one non-tensor item): refused, one line."""
    import sys
    from pathlib import Path

    from torchport.runtime.checkpoint import CheckpointRefusedError
    from torchport.runtime.dcp import load_state, save_state
    from torchport.storage import store

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
    import _hostile

    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 6)).sum().backward()
    opt.step()
    local = tmp_path / "ck"
    save_state(local, model=model, optimizer=opt, extra={})
    for plant, match in ((_hostile.plant_metadata, r"\.metadata' was refused"),
                         (_hostile.plant_item, r"param_groups\.0\.lr\)' was refused")):
        marker = tmp_path / f"ran-{plant.__name__}"
        plant(local, marker)
        url = f"{store_env}/hostile-{plant.__name__}"
        for f in local.iterdir():
            store.write_bytes(f"{url}/{f.name}", f.read_bytes())
        fresh = _model()
        with pytest.raises(CheckpointRefusedError, match=match + ".*posix.system") as info:
            load_state(url, model=fresh, optimizer=torch.optim.AdamW(fresh.parameters()))
        assert url in str(info.value) and "weights_only" not in str(info.value) and not marker.exists()
        save_state(local, model=model, optimizer=opt, extra={})   # a fresh copy for the next plant
