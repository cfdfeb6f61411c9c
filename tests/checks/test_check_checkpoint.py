"""Checkpoint portability: save on A, resume on B in a fresh process; seeded checkpoint defects fail."""

from __future__ import annotations

import pytest

from checks_targets import checkpoint_with_device_tensors, checkpoint_without_scaler, find_problem, healthy
from torchport.checks import Status, checkpoint_portability
from torchport.checks.checkpoint import inspect_checkpoint


def test_cpu_round_trip_resumes_bit_identically(cpu):
    r = checkpoint_portability(healthy(), include_emulated=False)
    assert r.status is Status.PASS, r.summary
    what = {e.what for e in r.evidence}
    assert {"loads with weights_only=True", "model state restored", "optimizer state restored", "scaler state restored",
            "scheduler state restored", "rng state restored", "resume continues bit-identically (2 steps)"} <= what


@pytest.mark.slow
def test_every_pair_of_cpu_and_emulated_npu(emulated_npu):
    r = checkpoint_portability(healthy())
    assert r.status is Status.PASS, r.summary
    pairs = {e.where for e in r.evidence if e.what == "model state restored"}
    assert pairs == {"cpu -> cpu", "cpu -> npu (emulated)", "npu (emulated) -> cpu", "npu (emulated) -> npu (emulated)"}
    lacks = next(e for e in r.evidence if e.what == "loading process lacks the source backend")
    assert lacks.where == "npu (emulated) -> cpu" and lacks.measured == "backends there: cpu"


def test_checkpoint_missing_scaler_state_fails(cpu):
    r = checkpoint_portability(checkpoint_without_scaler(), include_emulated=False)
    assert r.status is Status.FAIL
    e = find_problem(r, "scaler state restored")
    assert e.where.startswith("cpu -> cpu: ") and "scale" in e.where
    assert "absent from the checkpoint" in e.detail
    assert "scaler state restored" in r.summary


def test_checkpoint_with_device_tensors_fails_where_the_backend_is_missing(emulated_npu):
    r = checkpoint_portability(checkpoint_with_device_tensors(), sources=["npu"], destinations=["cpu"])
    assert r.status is Status.FAIL
    e = find_problem(r, "tensors stored with a device location")
    assert "model.0.0.weight (npu:0)" in e.where
    assert "plain torch.load(weights_only=True) on cpu" in e.detail  # fails there: no npu in that process
    assert "npu" in e.detail.split("on cpu:")[1]


def test_inspect_reports_locations_without_the_device(tmp_path, emulated_npu):
    import torch

    torch.save({"w": torch.ones(3, device="npu"), "c": torch.zeros(2)}, tmp_path / "x.pt")
    info = inspect_checkpoint(tmp_path / "x.pt")
    assert info["weights_only"] == "ok" and info["locations"] == {"npu:0": 1, "cpu": 1}
    assert info["device_tensors"] == ["w (npu:0)"]
