"""The embedded default dataset: learnable shapes/textures, generated once, atomically."""

from __future__ import annotations

import json

import numpy as np

from torchport.data import synth


def test_make_dataset_layout(tmp_path):
    m = synth.make_dataset(tmp_path, classes=4, train_per_class=3, val_per_class=2, size=32, seed=1)
    assert m["classes"] == ["circle", "ring", "square", "frame"]
    for split, n in (("train", 3), ("val", 2)):
        for c in m["classes"]:
            files = sorted((tmp_path / split / c).glob("*.jpg"))
            assert len(files) == n and files[0].read_bytes()[:2] == b"\xff\xd8"
    assert json.loads((tmp_path / "manifest.json").read_text())["version"] == synth.SYNTH_VERSION


def test_classes_differ_in_shape_not_colour():
    rng = np.random.default_rng(0)
    imgs = {k: [synth.render(k, 48, rng) for _ in range(20)] for k in ("circle", "stripes")}
    # mean colour overlaps between classes (colour carries no label) ...
    m = {k: np.mean([im.mean() for im in v]) for k, v in imgs.items()}
    assert abs(m["circle"] - m["stripes"]) < 40
    # ... while texture differs: stripes have much more horizontal-gradient energy
    def grad(im):
        return np.abs(np.diff(im.astype(float).mean(2), axis=1)).mean()
    assert np.mean([grad(i) for i in imgs["stripes"]]) > np.mean([grad(i) for i in imgs["circle"]])


def test_default_dataset_is_built_once_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path))
    calls = []
    real = synth.make_dataset

    def counting(root, **kw):
        calls.append(root)
        return real(root, **kw)

    monkeypatch.setattr(synth, "make_dataset", counting)
    kw = dict(classes=2, train_per_class=2, val_per_class=1, size=24)
    p1 = synth.default_dataset(**kw)
    p2 = synth.default_dataset(**kw)
    assert p1 == p2 and len(calls) == 1
    assert calls[0] != p1  # generated elsewhere, then renamed into place
    assert (p1 / "manifest.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary leftovers
