"""The documented example target and the default (reference trainer) target pass quick checks."""

from __future__ import annotations

from pathlib import Path

from torchport.checks import Status, data_determinism, device_audit, load_target

ROOT = Path(__file__).resolve().parents[2]


def test_example_target_follows_the_protocol(monkeypatch, cpu):
    monkeypatch.syspath_prepend(str(ROOT))
    target = load_target("examples.check_target:target")
    assert target.spec == "examples.check_target:target" and target.save_checkpoint is not None
    assert device_audit(target, device=cpu, steps=1, expect_accelerator=False).status is Status.SKIP  # cannot tell on CPU
    assert data_determinism(target, batches=2, workers=(0, 2)).status is Status.PASS


def test_default_target_is_the_reference_trainer(cpu):
    target = load_target(None)
    assert target.spec == "torchport.checks.reference:trainer_target"
    r = data_determinism(target, batches=2, workers=(0, 2))
    assert r.status is Status.PASS, r.summary


def test_default_target_does_not_hide_import_errors(monkeypatch):
    """A broken import inside torchport is a bug to surface, not a reason to check a different model."""
    import sys

    import pytest

    from torchport.checks.target import default_target

    monkeypatch.setitem(sys.modules, "torchport.checks.reference", None)   # import now raises ImportError
    with pytest.raises(ImportError):
        default_target()
