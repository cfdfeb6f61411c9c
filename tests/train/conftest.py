"""Fixtures for the trainer tests (helpers live in ``train_helpers.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """4 classes x (24 train + 8 val) JPEGs of 32 px, ImageFolder layout with train/ and val/."""
    from torchport.data.synth import make_dataset

    root = tmp_path_factory.mktemp("tiny") / "shapes"
    make_dataset(root, classes=4, train_per_class=24, val_per_class=8, size=32)
    return root


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """Subprocess environment: private cache, 1 thread, no device overrides (the CPU precision pin of
    tests/conftest.py stays: ``--precision auto`` means fp32 on every machine)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_") or k.startswith("TORCHPORT_CPU_")}
    e.update({"TORCHPORT_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    return e
