"""Tiny datasets shared by the data tests (built once per session, a few hundred KB)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory):
    """3 classes x (12 train + 4 val) 40px synthetic JPEGs in train/ + val/."""
    from torchport.data.synth import make_dataset

    root = tmp_path_factory.mktemp("synth")
    make_dataset(root, classes=3, train_per_class=12, val_per_class=4, size=40, quality=90, seed=0)
    return root


@pytest.fixture(scope="session")
def train_folder(synth_root):
    return synth_root / "train"


@pytest.fixture(scope="session")
def shards(tmp_path_factory, train_folder):
    """{"jpeg": dir, "predecoded": dir} packed from ``train_folder`` (predecoded at shorter side 48)."""
    from torchport.data.pack import pack

    out = {}
    for mode in ("jpeg", "predecoded"):
        dst = tmp_path_factory.mktemp("shards") / mode
        pack(train_folder, dst, mode=mode, size=48, workers=1)
        out[mode] = dst
    return out
