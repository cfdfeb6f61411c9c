"""Parity with a prediction (issue 34 item 2): the drift band of a card's default numerics, and a card run judged
against that band instead of against zero. The "card run" is the emulated npu computing in HF32
(``torchport.emulate.numerics("npu")``), recorded like a real card run."""

from __future__ import annotations

import pytest

from checks_targets import find_problem, healthy
from torchport.checks import Status, parity
from torchport.checks.predict import band, drift_runs, predict_parity

STEPS = 8


def _ev(result, text):
    return next(e for e in result.evidence if text in e.what)


def test_band_envelope_is_widened_by_spread_and_tolerance():
    lo, hi = band([1.0, 2.0], [[1.1, 2.0], [0.9, 2.0]])
    # step 0: envelope [0.9, 1.1], spread 0.2, tol 1e-4 + 1e-3 * 1.0
    assert lo[0] == pytest.approx(0.9 - 0.2 - 1.1e-3) and hi[0] == pytest.approx(1.1 + 0.2 + 1.1e-3)
    assert lo[1] == pytest.approx(2.0 - 2.1e-3) and hi[1] == pytest.approx(2.0 + 2.1e-3)


def test_predict_reports_the_drift_band_without_a_reference(cpu):
    r = predict_parity(healthy(), "npu", steps=STEPS)
    assert r.status is Status.PASS, r.summary
    s = r.series
    assert len(s["loss fp32"]) == len(s["loss npu (predicted)"]) == len(s["weight norm fp32"]) == STEPS
    assert s["loss fp32"] != s["loss npu (predicted)"]                  # HF32 convolutions drift
    assert all(lo <= x <= hi for lo, x, hi in zip(s["band low"], s["loss npu (predicted)"], s["band high"]))
    assert all(lo <= x <= hi for lo, x, hi in zip(s["band low"], s["loss fp32"], s["band high"]))
    assert "predicted npu default numerics drift" in r.summary
    assert _ev(r, "a zero-drift parity check would flag").threshold.startswith("|dL| <=")
    assert float(_ev(r, "predicted loss drift").measured.split(" / ")[1]) > 0
    with pytest.raises(ValueError, match="--predict 'tpu'"):
        predict_parity(healthy(), "tpu", steps=1)


def test_drift_runs_variants_differ_as_the_flags_say(cpu):
    runs = drift_runs(healthy(), ["fp32", "npu", "npu-hf32-all", "cuda"], steps=3)
    loss = {k: v["loss"] for k, v in runs.items()}
    assert len({tuple(v) for v in loss.values()}) == 4                   # four different numerics
    assert len({v["data_hash"] for v in runs.values()}) == 1             # on the same batches
    assert loss["fp32"][0] != loss["npu"][0]                            # the first forward already differs


def test_a_card_run_inside_the_band_passes_and_a_broken_one_fails(tmp_path, cpu, emulated_npu):
    import torchport.emulate as emulate
    from torchport.runtime.device import select_device

    card = tmp_path / "card.json"
    with emulate.numerics("npu"):
        parity(healthy(), device=select_device("npu"), record=card, steps=STEPS)
    r = predict_parity(healthy(), "npu", steps=STEPS, reference=card)
    assert r.status is Status.PASS, r.summary
    # the emulated card computes the same bits as the host prediction (nearest-even rounding)
    assert r.series["loss card (reference)"] == r.series["loss npu (predicted)"]
    assert _ev(r, "against zero drift").status is Status.PASS

    broken = tmp_path / "broken.json"
    k = 4

    def perturb_from_k(step, state):
        if step == k:
            emulate.set_perturbation({"aten.addmm": 0.1})

    try:
        with emulate.numerics("npu"):
            parity(healthy(), device=select_device("npu"), record=broken, steps=STEPS, on_step=perturb_from_k)
    finally:
        emulate.clear_perturbation()
    r = predict_parity(healthy(), "npu", steps=STEPS, reference=broken)
    assert r.status is Status.FAIL
    ev = find_problem(r, "card loss inside the predicted band")
    assert ev.status is Status.FAIL and int(ev.where.split()[-1]) >= k


def test_cli_predict_bad_inputs(tmp_path):
    from typer.testing import CliRunner

    from torchport.cli.main import app

    res = CliRunner().invoke(app, ["check", "--only", "parity", "--predict", "tpu"])
    assert res.exit_code == 2 and "--predict 'tpu': expected one of npu, cuda" in res.output
    res = CliRunner().invoke(app, ["check", "--only", "parity", "--predict", "npu", "--record", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "exclude each other" in res.output
