"""Dominant-term detection: constructed input-bound and compute-bound setups, plus the decision text."""

from __future__ import annotations

import pytest

from torchport.workload import Workload
from torchport.profile import ProfileConfig, analyze, run_profile


def test_input_bound_case_slow_dataset():
    """A tiny model fed by a dataset that sleeps 10 ms per sample (80 ms per batch of 8)."""
    cfg = ProfileConfig(workload=Workload(model="tinycnn", batch=8, size=32, num_classes=10, slow_data_ms=10.0),
                        steps=3, warmup=1, free_steps=0, device="cpu")
    res = run_profile(cfg)
    a = res.analysis
    assert a.verdict == "input-bound" and a.dominant == "input" and a.dominant_phase == "data"
    assert res.fractions["data"] > 0.5
    assert res.phase_s["data"] >= 0.8 * 8 * 0.010
    text = " ".join(a.advice)
    assert "shards" in text and "decode" in text and "prefetch" in text and "GIL" in text


def test_compute_bound_case_heavy_model_instant_data():
    """ResNet-18 on synthetic images already in memory: data wait is negligible."""
    cfg = ProfileConfig(workload=Workload(model="resnet18", batch=8, size=64, num_classes=10),
                        steps=3, warmup=1, free_steps=0, device="cpu")
    res = run_profile(cfg)
    a = res.analysis
    assert a.verdict == "compute-bound" and a.dominant == "compute"
    assert a.dominant_phase in ("forward", "backward")
    assert res.fractions["data"] < 0.1
    text = " ".join(a.advice)
    assert "AMP" in text and "channels_last" in text and "torch.compile (backend 'inductor'" in text
    assert "resolution" in text
    assert "cpu" in a.warning and "re-profile" in a.warning


@pytest.mark.parametrize(
    "phases, verdict, must_mention",
    [
        ({"data": 1, "copy": 6, "forward": 1, "backward": 1, "optimizer": 0.5, "other": 0.1}, "copy-bound",
         ("pinned", "uint8")),
        ({"data": 6, "copy": 0.1, "forward": 1, "backward": 1, "optimizer": 0.5, "other": 0.1}, "input-bound",
         ("shards", "GIL")),
        ({"data": 0.1, "copy": 0.1, "forward": 2, "backward": 3, "optimizer": 1, "other": 0.1}, "compute-bound",
         ("AMP", "channels_last")),
        ({"data": 0.1, "copy": 0.1, "forward": 1, "backward": 1, "optimizer": 0.1, "other": 5}, "overhead-bound",
         ("trace",)),
        # the term, not the single largest phase, decides: data 40% vs compute 60%
        ({"data": 4, "copy": 0, "forward": 2, "backward": 3, "optimizer": 1, "other": 0}, "compute-bound", ()),
        # custom phase names count as "other"
        ({"data": 0.1, "forward": 1, "checkpoint": 4}, "overhead-bound", ()),
    ],
)
def test_verdicts_on_constructed_phase_times(phases, verdict, must_mention):
    a = analyze(phases, device="npu:0")
    assert a.verdict == verdict
    assert sum(a.groups.values()) == pytest.approx(1.0)
    for word in must_mention:
        assert word in " ".join(a.advice)
    assert "npu:0" in a.warning and "another" in a.warning


def test_no_amp_advice_when_already_running_amp():
    phases = {"data": 0.1, "forward": 2, "backward": 3, "optimizer": 1}
    assert "Turn on AMP" in analyze(phases, precision="fp32", amp_hint="bf16").advice[0]
    assert "bf16 on this backend" in analyze(phases, precision="fp32", amp_hint="bf16").advice[0]
    assert "Turn on AMP" not in " ".join(analyze(phases, precision="fp16").advice)
    # no fast low precision here (an AVX2 CPU): AMP is not advised
    assert "Turn on AMP" not in " ".join(analyze(phases, precision="fp32", amp_hint=None).advice)
    assert "AMP would not help" in analyze(phases, precision="fp32", amp_hint=None).advice[0]


def test_fusion_advice_follows_the_backend_compile_support():
    phases = {"forward": 2, "backward": 3}
    assert "torch.compile (backend 'inductor'" in " ".join(analyze(phases, compile_backend="inductor").advice)
    assert "not assumed" in " ".join(analyze(phases, compile_backend=None).advice)


def test_analyze_rejects_empty_profiles():
    with pytest.raises(ValueError, match="no time"):
        analyze({"data": 0.0})
