"""Numerical parity: record on A, replay on B; a perturbation after k steps fails and names the module."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from checks_targets import find_problem, healthy
from torchport.checks import Status, compare_tensors, parity
from torchport.checks.compare import MSPROBE, TOLERANCES, tolerance_for

STEPS = 8


def test_msprobe_thresholds():
    a = torch.linspace(-1, 1, 1000)
    assert compare_tensors(a, a.clone()).status is Status.PASS
    assert compare_tensors(a, a * 1.0001).status is Status.PASS            # cosine 1, tiny error
    noisy = a + 0.2 * torch.sin(torch.arange(1000.0))                       # cosine ~0.97, err ~0.2 -> warn
    d = compare_tensors(a, noisy)
    assert MSPROBE.fail_cosine < d.cosine < MSPROBE.warn_cosine and d.status is Status.WARN
    assert compare_tensors(a, -a).status is Status.FAIL                     # cosine -1
    assert compare_tensors(a, a + 2).status is Status.FAIL                  # max abs err 2 > 1
    b = a.clone()
    b[3] = float("nan")
    assert compare_tensors(a, b).nan_inf_mismatch and compare_tensors(a, b).status is Status.FAIL
    assert tolerance_for("fp32") is TOLERANCES["fp32"] and tolerance_for("bf16") is TOLERANCES["amp"]
    assert TOLERANCES["amp"].rtol > TOLERANCES["fp32"].rtol


def test_without_reference_records_on_cpu_and_replays_here(portable_device):
    r = parity(healthy(), device=portable_device, steps=STEPS)
    assert r.status is Status.PASS, r.summary
    assert len(r.series["loss A"]) == len(r.series["loss B"]) == STEPS
    # the emulated NPU runs the same kernels on host memory: bit-identical, like cpu vs cpu
    assert r.series["loss A"] == r.series["loss B"]


def test_record_on_cpu_replay_on_emulated_npu(tmp_path, cpu, emulated_npu):
    from torchport.runtime.device import select_device

    ref = tmp_path / "ref.json"
    rec = parity(healthy(), device=cpu, record=ref, steps=STEPS)
    assert rec.status is Status.PASS
    assert {p.name for p in tmp_path.iterdir()} == {"ref.json", "ref.init.pt", "ref.trace.pt"}
    doc = json.loads(ref.read_text())
    assert len(doc["loss"]) == len(doc["grad_norm"]) == STEPS
    assert doc["platform"] == "cpu" and doc["data_hash"] and doc["environment"]["versions"]["torch"]
    assert "model.5" in doc["modules"]["step0"] and {"mean", "std", "nan", "inf"} <= set(doc["modules"]["step0"]["model.5"])
    assert doc["tolerance"]["rtol"] == TOLERANCES["fp32"].rtol

    # initial weights come from the seed checkpoint, not from the RNG: a factory that consumes
    # random numbers first still replays exactly.
    def shifted():
        torch.rand(1000)
        return healthy().build_model()

    r = parity(dataclasses.replace(healthy(), build_model=shifted), device=select_device("npu"), reference=ref)
    assert r.status is Status.PASS, r.summary
    assert r.platform.startswith("npu")
    assert r.series["loss B"] == doc["loss"]


def test_perturbation_after_k_steps_names_the_module(tmp_path, cpu, emulated_npu):
    from torchport.emulate import clear_perturbation, set_perturbation
    from torchport.runtime.device import select_device

    ref = tmp_path / "ref.json"
    parity(healthy(), device=cpu, record=ref, steps=STEPS)
    k = 4

    def perturb_from_k(step, state):
        if step == k:  # the only Linear (model.5) drifts, like a kernel with a different accumulation order
            set_perturbation({"aten.addmm": 0.1})

    try:
        r = parity(healthy(), device=select_device("npu"), reference=ref, on_step=perturb_from_k)
    finally:
        clear_perturbation()
    assert r.status is Status.FAIL
    loc = find_problem(r, "first diverging module")
    assert loc.where == f"model.5 (step {k})"
    assert "first diverging module: model.5" in r.summary
    assert f"first exceeded at step {k}" in find_problem(r, "loss after").where


def test_different_data_is_reported_before_numbers(tmp_path, cpu):
    from torchport.checks.builtin import build_tiny_loader

    ref = tmp_path / "ref.json"
    parity(healthy(), device=cpu, record=ref, steps=4)
    other = dataclasses.replace(healthy(), build_loader=lambda spec: build_tiny_loader(spec, length=48))
    r = parity(other, device=cpu, reference=ref)
    assert r.status is Status.FAIL
    assert find_problem(r, "data hash").where == "batch 0"


def test_missing_seed_checkpoint_fails_clearly(tmp_path, cpu):
    ref = tmp_path / "ref.json"
    parity(healthy(), device=cpu, record=ref, steps=2)
    (tmp_path / "ref.init.pt").unlink()
    r = parity(healthy(), device=cpu, reference=ref)
    assert r.status is Status.FAIL and "ref.init.pt" in r.summary


@pytest.mark.parametrize("precision", ["bf16"])
def test_amp_reference_uses_the_amp_tolerance(tmp_path, cpu, precision):
    ref = tmp_path / "ref.json"
    parity(dataclasses.replace(healthy(), precision=precision), device=cpu, record=ref, steps=3)
    assert json.loads(ref.read_text())["tolerance"]["rtol"] == TOLERANCES["amp"].rtol
    r = parity(dataclasses.replace(healthy(), precision=precision), device=cpu, reference=ref)
    assert r.status is Status.PASS, r.summary
