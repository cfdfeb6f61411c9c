"""Fixtures for the trainer tests (helpers live in ``train_helpers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clean_env import clean_env


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
    e = clean_env()
    e.update({"TORCHPORT_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    return e
