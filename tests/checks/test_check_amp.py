"""AMP behaviour: overflow skip + backoff + growth + bf16 on every portable device; a disabled scaler fails."""

from __future__ import annotations

from checks_targets import disabled_scaler, find_problem, healthy
from torchport.checks import Status, amp_behaviour


def test_healthy_amp_passes_everywhere(portable_device):
    r = amp_behaviour(healthy(), device=portable_device, growth_interval=2)
    assert r.status in (Status.PASS,), r.summary + "\n" + "\n".join(f"{e.status} {e.what} {e.measured}" for e in r.evidence)
    scale, skipped = r.series["loss scale"], r.series["skipped"]
    assert skipped == [0.0, 1.0, 0.0, 0.0]
    assert scale[1] == scale[0] / 2 and scale[-1] == scale[1] * 2  # backoff, then growth after 2 clean steps
    names = {e.what for e in r.evidence}
    assert {"overflow step skipped", "parameters bit-identical after the skipped step",
            "LR scheduler not stepped on the skipped step", "overflow event recorded"} <= names


def test_emulated_npu_uses_fp16_with_a_scaler(emulated_npu):
    from torchport.runtime.device import select_device

    r = amp_behaviour(healthy(), device=select_device("npu"), growth_interval=2)
    assert r.status is Status.PASS, r.summary
    assert "fp16 with scaler" in r.summary
    # autocast is tested with the backend's "auto" precision (bf16 on a 910B), the scaler with fp16
    assert any(e.what.startswith("autocast active") for e in r.evidence)


def test_disabled_scaler_fails_and_names_its_origin(cpu):
    r = amp_behaviour(disabled_scaler(), device=cpu, growth_interval=2)
    assert r.status is Status.FAIL
    present = find_problem(r, "loss scaler present and enabled")
    assert "checks_targets._disabled_scaler" in present.where
    assert find_problem(r, "overflow step skipped").measured is False
    changed = find_problem(r, "parameters bit-identical")
    assert "model.0.0.weight" in changed.where and "non-finite" in changed.detail
    find_problem(r, "LR scheduler not stepped")
