"""A small, learnable image-classification dataset of real JPEG files (the trainer's default data).

Ten classes of shapes and textures -- circle, ring, square, frame, triangle, cross, star, stripes,
checker, dots -- each drawn at a random position, scale and rotation, in a random colour on a random
colour-gradient background with pixel noise and a distractor blob. Colour carries no label
information, so a model must learn shape and texture: a tiny CNN gets well above chance in
minutes on a CPU; it is not solvable by a colour histogram.

Files are written in ImageFolder layout under ``train/`` and ``val/`` (``<split>/<class>/<n>.jpg``)
with a ``manifest.json`` marker. :func:`default_dataset` builds it once, atomically, in the cache
directory (``$TORCHPORT_CACHE`` or ``~/.cache/torchport``).

Example::

    root = default_dataset()                   # ~/.cache/torchport/synth-v1-.../
    loader = make_loader(root, batch_size=64, train=True, image_size=64)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CLASSES", "SYNTH_VERSION", "make_dataset", "default_dataset", "cache_dir", "render"]

SYNTH_VERSION = 1
CLASSES = ("circle", "ring", "square", "frame", "triangle", "cross", "star", "stripes", "checker", "dots")


def cache_dir() -> Path:
    """``$TORCHPORT_CACHE`` or ``~/.cache/torchport`` (created)."""
    root = Path(os.environ.get("TORCHPORT_CACHE") or Path.home() / ".cache" / "torchport")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _mask(kind: str, u: np.ndarray, v: np.ndarray, r: float, rng: np.random.Generator) -> np.ndarray:
    """Soft mask in [0, 1] of shape ``kind`` in rotated, centred coordinates (u, v) with radius r."""
    d = np.sqrt(u * u + v * v)
    edge = 1.2  # pixels of antialiasing

    def inside(sd):  # signed distance (negative inside) -> soft mask
        return np.clip(0.5 - sd / edge, 0.0, 1.0)

    box = np.maximum(np.abs(u), np.abs(v))
    if kind == "circle":
        return inside(d - r)
    if kind == "ring":
        return inside(np.abs(d - 0.75 * r) - 0.22 * r)
    if kind == "square":
        return inside(box - 0.8 * r)
    if kind == "frame":
        return inside(np.abs(box - 0.7 * r) - 0.16 * r)
    if kind == "triangle":
        s = 0.9 * r
        e1 = v - 0.5 * s
        e2 = -0.866 * u - 0.5 * v - 0.5 * s
        e3 = 0.866 * u - 0.5 * v - 0.5 * s
        return inside(np.maximum(np.maximum(e1, e2), e3))
    if kind == "cross":
        arm = 0.25 * r
        return inside(np.minimum(np.maximum(np.abs(u) - arm, np.abs(v) - r), np.maximum(np.abs(v) - arm, np.abs(u) - r)))
    if kind == "star":
        ang = np.arctan2(v, u)
        return inside(d - r * (0.55 + 0.45 * np.cos(5 * ang)))
    period = max(3.0, r * rng.uniform(0.35, 0.55))
    region = inside(box - r)
    if kind == "stripes":
        return region * (np.sin(2 * np.pi * u / period) > 0)
    if kind == "checker":
        return region * ((np.sin(2 * np.pi * u / period) * np.sin(2 * np.pi * v / period)) > 0)
    if kind == "dots":
        cu = (np.mod(u, period) - period / 2)
        cv = (np.mod(v, period) - period / 2)
        return region * inside(np.sqrt(cu * cu + cv * cv) - period * 0.3)
    raise ValueError(f"unknown class {kind!r}")


def _colour(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(0, 255, size=3)


def render(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """One ``(size, size, 3)`` uint8 image of class ``kind``."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    # background: random two-colour gradient in a random direction
    c0, c1 = _colour(rng), _colour(rng)
    a = rng.uniform(0, 2 * np.pi)
    t = ((np.cos(a) * xx + np.sin(a) * yy) / size)[..., None]
    t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
    img = c0 * (1 - t) + c1 * t
    # a distractor blob in another colour
    bx, by, br = rng.uniform(0, size, 2).tolist() + [rng.uniform(0.08, 0.2) * size]
    blob = np.clip(0.5 - (np.sqrt((xx - bx) ** 2 + (yy - by) ** 2) - br) / 1.5, 0, 1)[..., None]
    img = img * (1 - 0.6 * blob) + 0.6 * blob * _colour(rng)
    # the shape: foreground colour far enough from the local background
    fg = _colour(rng)
    while np.abs(fg - img.mean(axis=(0, 1))).sum() < 150:
        fg = _colour(rng)
    r = rng.uniform(0.2, 0.38) * size
    cx, cy = rng.uniform(r, size - r), rng.uniform(r, size - r)
    th = rng.uniform(0, 2 * np.pi)
    u = np.cos(th) * (xx - cx) + np.sin(th) * (yy - cy)
    v = -np.sin(th) * (xx - cx) + np.cos(th) * (yy - cy)
    m = _mask(kind, u, v, r, rng)[..., None]
    img = img * (1 - m) + fg * m
    img += rng.normal(0, rng.uniform(4, 14), img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_dataset(
    root: str | os.PathLike,
    *,
    classes: int = 10,
    train_per_class: int = 300,
    val_per_class: int = 60,
    size: int = 72,
    quality: int = 90,
    seed: int = 0,
) -> dict[str, Any]:
    """Write the synthetic dataset under ``root`` (``train/`` and ``val/`` ImageFolders of JPEGs).

    Args:
        root: output directory (created; existing files with the same names are overwritten).
        classes: how many of :data:`CLASSES` to use (1..10).
        train_per_class, val_per_class: images per class and split.
        size: image side in pixels. quality: JPEG quality. seed: generator seed.

    Returns:
        The manifest written to ``root/manifest.json``.
    """
    import simplejpeg

    if not 1 <= classes <= len(CLASSES):
        raise ValueError(f"classes={classes} must be in 1..{len(CLASSES)}")
    if size < 16:
        raise ValueError(f"size={size} is too small (>= 16)")
    root = Path(root)
    names = CLASSES[:classes]
    counts = {"train": train_per_class, "val": val_per_class}
    for split, per in counts.items():
        for c, kind in enumerate(names):
            d = root / split / kind
            d.mkdir(parents=True, exist_ok=True)
            ss = np.random.SeedSequence([seed, c, 0 if split == "train" else 1])
            rng = np.random.default_rng(ss)
            for n in range(per):
                img = render(kind, size, rng)
                (d / f"{n:05d}.jpg").write_bytes(simplejpeg.encode_jpeg(img, quality=quality, colorsubsampling="420"))
    manifest = {
        "name": "torchport-synth",
        "version": SYNTH_VERSION,
        "classes": list(names),
        "train_per_class": train_per_class,
        "val_per_class": val_per_class,
        "size": size,
        "quality": quality,
        "seed": seed,
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def default_dataset(**kwargs: Any) -> Path:
    """Path of the default synthetic dataset, generating it once (atomically) in :func:`cache_dir`.

    Generation writes to a temporary directory and renames it into place, so concurrent
    processes never see a half-written dataset; ``manifest.json`` marks a finished one.

    Args:
        **kwargs: :func:`make_dataset` options (a different set gets its own cache entry).
    """
    params = {"classes": 10, "train_per_class": 300, "val_per_class": 60, "size": 72, "quality": 90, "seed": 0}
    unknown = set(kwargs) - set(params)
    if unknown:
        raise TypeError(f"unknown default_dataset option(s): {', '.join(sorted(unknown))}")
    params.update(kwargs)
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    final = cache_dir() / f"synth-v{SYNTH_VERSION}-{key}"
    marker = final / "manifest.json"
    if marker.is_file():
        try:
            if json.loads(marker.read_text()).get("version") == SYNTH_VERSION:
                return final
        except ValueError:
            pass
        shutil.rmtree(final, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        make_dataset(tmp, **params)
        try:
            os.rename(tmp, final)
        except OSError:
            if not marker.is_file():  # neither we nor a concurrent writer finished it
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
