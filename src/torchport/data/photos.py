"""A realistic JPEG benchmark set built from the real photographs that scikit-image ships.

Decode cost depends on content: flat synthetic shapes decode several times faster than
photographs, so a data-pipeline benchmark on synthetic images flatters every JPEG path. Each
image here is a random crop of a real photo (astronaut, chelsea the cat, coffee, rocket,
motorcycle, Hubble deep field, retina, immunohistochemistry), scaled to ImageNet's typical
~500x375 (a quarter portrait 375x500), flipped, colour-jittered, with sensor-like noise, and
encoded at quality ~90 with 4:2:0 chroma -- the statistics of an ImageNet JPEG (~60-120 KB).

Example::

    root = make_photos("/tmp/photos", count=1000)       # ImageFolder: /tmp/photos/<class>/<n>.jpg
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["PHOTO_VERSION", "make_photos", "photos_cache", "source_photos"]

PHOTO_VERSION = 1
_SOURCES = ("astronaut", "chelsea", "coffee", "rocket", "motorcycle", "hubble", "retina", "ihc")


def source_photos() -> dict[str, np.ndarray]:
    """The bundled colour photographs, ``{class name: HWC uint8}`` (needs scikit-image)."""
    try:
        import skimage.data as d
    except ImportError:
        raise ModuleNotFoundError("`torchport data photos` needs scikit-image: pip install 'torchport[bench]'",
                                  name="skimage") from None
    loaders = {
        "astronaut": d.astronaut,
        "chelsea": d.chelsea,
        "coffee": d.coffee,
        "rocket": d.rocket,
        "motorcycle": lambda: d.stereo_motorcycle()[0],
        "hubble": d.hubble_deep_field,
        "retina": d.retina,
        "ihc": d.immunohistochemistry,
    }
    out = {}
    for name in _SOURCES:
        try:
            out[name] = np.ascontiguousarray(loaders[name]()[..., :3])
        except Exception:  # a photo that needs a download is simply left out
            continue
    if len(out) < 2:
        raise RuntimeError("scikit-image's bundled photographs are unavailable; reinstall scikit-image")
    return out


def make_photos(
    dst: str | os.PathLike,
    *,
    count: int = 1000,
    quality: int = 90,
    size: tuple[int, int] = (375, 500),
    noise: float = 6.0,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write ``count`` photo JPEGs in ImageFolder layout (one class per source photo).

    Args:
        dst: output directory. count: total images (spread evenly over classes).
        quality: JPEG quality. size: (height, width) of landscape images (portrait is transposed).
        noise: sensor-noise sigma in grey levels. seed: generator seed.
        progress: ``(done, total)`` callback.

    Returns:
        The manifest written to ``dst/manifest.json`` (counts, mean file size).
    """
    import simplejpeg
    from PIL import Image

    srcs = source_photos()
    names = sorted(srcs)
    rng = np.random.default_rng(seed)
    dst = Path(dst)
    sizes = []
    for n in range(count):
        cls = names[n % len(names)]
        img = srcs[cls]
        H, W = img.shape[:2]
        th, tw = (size[1], size[0]) if rng.random() < 0.25 else size
        ar = tw / th
        ch = int(min(H, W / ar) * rng.uniform(0.45, 1.0))
        cw = max(1, int(ch * ar))
        y = int(rng.integers(0, H - ch + 1))
        x = int(rng.integers(0, W - cw + 1))
        a = np.asarray(Image.fromarray(img).resize((tw, th), Image.BICUBIC, box=(x, y, x + cw, y + ch)), dtype=np.float32)
        a = a * rng.uniform(0.8, 1.2, size=3) + rng.normal(0, noise, a.shape)
        if rng.random() < 0.5:
            a = a[:, ::-1]
        a = np.ascontiguousarray(np.clip(a, 0, 255).astype(np.uint8))
        data = simplejpeg.encode_jpeg(a, quality=quality, colorsubsampling="420")
        d = dst / cls
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{n:06d}.jpg").write_bytes(data)
        sizes.append(len(data))
        if progress:
            progress(n + 1, count)
    manifest = {
        "name": "torchport-photos",
        "version": PHOTO_VERSION,
        "count": count,
        "classes": names,
        "quality": quality,
        "size": list(size),
        "mean_bytes": int(np.mean(sizes)) if sizes else 0,
        "seed": seed,
    }
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def photos_cache(count: int = 1000, **kwargs: Any) -> Path:
    """A cached photo set of ``count`` images (built once, atomically, under the torchport cache dir)."""
    from torchport.data.synth import cache_dir

    name = f"photos-v{PHOTO_VERSION}-n{count}" + "".join(f"-{k}{v}" for k, v in sorted(kwargs.items()))
    final = cache_dir() / name
    if (final / "manifest.json").is_file():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        make_photos(tmp, count=count, **kwargs)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "manifest.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
