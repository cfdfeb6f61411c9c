"""``torchport data pack``: turn an ImageFolder into torchport shards.

Two modes:

* ``predecoded`` -- decode once, resize so the shorter side is ``size`` (aspect kept), store
  uint8 RGB pixels. Reading is a memory-map slice: no decoding at training time.
* ``jpeg`` -- store each file's JPEG data unchanged when libjpeg-turbo decodes it cleanly;
  re-encode (at ``quality``) files that are not JPEG, are CMYK, or exceed ``max_size`` on their
  longer side. Sequential JPEGs are rewritten losslessly with restart markers
  (:func:`~torchport.data.decode.add_restart_markers`: same coefficients, same pixels -- checked
  for every file -- and usually a few % smaller), so a random crop Huffman-decodes only the
  segments it covers; ``restart_markers`` in the report counts them.

Every source file is decoded while packing; files that fail are *skipped and listed* in
``pack_report.json`` with the reason -- never silently dropped.

Example::

    report = pack("raw/train", "shards/train", mode="predecoded", size=256)
    print(report["written"], report["skipped"])
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing as mp
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from torchport.data.decode import add_restart_markers, check_pixels, decode_any, is_jpeg
from torchport.data.errors import SourceError
from torchport.data.folder import IMAGE_EXTENSIONS, SPLITS, broken_links, list_class_files, list_classes, refused_links
from torchport.data.format import MODES, ShardWriter

__all__ = ["PackConfig", "pack", "pack_splits", "scan_image_folder", "resize_shorter", "IMG_EXTENSIONS", "split_dirs"]

IMG_EXTENSIONS = IMAGE_EXTENSIONS  # old name, kept for importers


@dataclasses.dataclass(frozen=True, kw_only=True)
class PackConfig:
    """How to pack.

    Args:
        mode: ``"predecoded"`` or ``"jpeg"``.
        size: predecoded: the shorter side after resizing (default 256 for 224 training).
        max_size: jpeg: re-encode images whose longer side exceeds this (None: keep all bytes).
        quality: JPEG quality used when re-encoding.
        shard_bytes: target shard size.
        workers: decoding processes (default: CPU count).
        restart_markers: jpeg: rewrite sequential JPEGs losslessly with restart markers (faster
            random crops, same pixels); False keeps every accepted file byte for byte.
    """

    mode: str = "jpeg"
    size: int = 256
    max_size: int | None = None
    quality: int = 90
    shard_bytes: int = 256 << 20
    workers: int | None = None
    restart_markers: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"pack mode {self.mode!r} is unknown; use one of {', '.join(MODES)}")
        if self.size < 8:
            raise ValueError(f"size={self.size} is too small (>= 8)")
        if not 1 <= self.quality <= 100:
            raise ValueError(f"quality={self.quality} must be in 1..100")


def scan_image_folder(root: str | os.PathLike) -> tuple[list[str], list[tuple[str, int]]]:
    """List an ImageFolder: ``root/<class>/<image>`` (the rules of :mod:`torchport.data.folder`).

    Returns:
        ``(classes, [(path, label), ...])`` sorted by class then file name.

    Raises:
        SourceError: unreadable directory, no class sub-directories, or no images.
    """
    root = Path(root)
    try:
        classes = list_classes(root)
    except (FileNotFoundError, NotADirectoryError):
        raise SourceError(f"source directory {root} does not exist (expected ImageFolder layout: {root}/<class>/<image>)") from None
    except PermissionError as e:
        raise SourceError(f"source directory {root} is not readable ({e}); check its permissions") from None
    if not classes:
        raise SourceError(f"{root} has no class sub-directories; expected ImageFolder layout {root}/<class>/<image>")
    items: list[tuple[str, int]] = []
    for label, name in enumerate(classes):
        d = root / name
        try:
            files, _ = list_class_files(d)
        except PermissionError as e:
            raise SourceError(f"class directory {d} is not readable ({e}); check its permissions") from None
        items.extend((str(d / f), label) for f in files)
    if not items:
        raise SourceError(f"{root} has class directories but no images with extensions {', '.join(IMAGE_EXTENSIONS)}")
    return classes, items


def split_dirs(root: str | os.PathLike) -> list[str]:
    """Split sub-directories (``train``, ``val``, ``test``) of ``root`` -- ImageFolders or shard directories.

    Returns ``[]`` when ``root`` has none (it is then one ImageFolder or one shard directory).
    """
    from torchport.data.format import is_shard_dir

    root = Path(root)
    out = []
    for name in SPLITS:
        d = root / name
        if d.is_dir() and (is_shard_dir(d) or any(e.is_dir() for e in os.scandir(d))):
            out.append(name)
    return out


def resize_shorter(img: np.ndarray, size: int) -> np.ndarray:
    """Resize HWC uint8 so the shorter side is ``size`` (aspect kept; antialiased bilinear via Pillow)."""
    from PIL import Image

    h, w = img.shape[:2]
    if min(h, w) == size:
        return np.ascontiguousarray(img)
    if h <= w:
        nh, nw = size, max(1, int(round(w * size / h)))
    else:
        nh, nw = max(1, int(round(h * size / w))), size
    return np.asarray(Image.fromarray(img).resize((nw, nh), Image.BILINEAR))


def _encode_one(args: tuple[str, str, int, int | None, int, bool]) -> tuple[bytes | None, int, int, str | None, str | None, bool]:
    """Pool task: read + check + convert one file. Returns (payload, h, w, error, note, restart markers added)."""
    payload, h, w, err, note, pixels = _convert_one(*args[:5])
    if payload is None or args[1] != "jpeg" or not args[5]:
        return payload, h, w, err, note, False
    out = _with_restarts(payload, pixels)
    return (out or payload), h, w, err, note, out is not None


def _with_restarts(data: bytes, pixels: np.ndarray | None = None) -> bytes | None:
    """``data`` with restart markers for fast crops (lossless; checked pixel for pixel against ``pixels``, the
    decode of ``data`` when the caller has it), or None to keep ``data``."""
    import simplejpeg

    try:
        out = add_restart_markers(data)
        if out is None:
            return None
        if pixels is None:
            pixels = simplejpeg.decode_jpeg(data, colorspace="RGB")
        same = np.array_equal(simplejpeg.decode_jpeg(out, colorspace="RGB"), pixels)
    except ValueError:
        return None
    return out if same else None


def _convert_one(path: str, mode: str, size: int, max_size: int | None, quality: int
                 ) -> tuple[bytes | None, int, int, str | None, str | None, np.ndarray | None]:
    """Read + check + convert one file. Returns (payload, h, w, error, note, the payload's RGB pixels when the
    check decoded them, else None)."""
    import simplejpeg

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return None, 0, 0, f"unreadable: {e}", None, None
    try:
        check_pixels(data)   # header only: a decompression bomb is skipped before any pixel is allocated
        if mode == "jpeg" and is_jpeg(data):
            try:
                img = simplejpeg.decode_jpeg(data, colorspace="RGB")  # strict: also catches truncation
                h, w = img.shape[:2]
                if max_size is None or max(h, w) <= max_size:
                    return data, h, w, None, None, img
                note = "re-encoded: larger than max_size"
            except ValueError as e:
                img = decode_any(data)  # Pillow may still read it (CMYK, odd markers); else -> corrupt
                note = f"re-encoded: {e}"
        else:
            img = decode_any(data)
            note = "re-encoded: not a JPEG" if mode == "jpeg" else None
    except ValueError as e:
        return None, 0, 0, str(e), None, None
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    if mode == "predecoded":
        if min(img.shape[:2]) > size * 2:  # cheap pre-shrink with libjpeg's DCT scaling
            f = 2 ** int(math.log2(min(img.shape[:2]) / size))
            if is_jpeg(data) and f >= 2:
                try:
                    img = simplejpeg.decode_jpeg(
                        data, colorspace="RGB", min_height=math.ceil(img.shape[0] / f), min_width=math.ceil(img.shape[1] / f),
                        min_factor=min(f, 8),
                    )
                except ValueError:
                    pass
        out = resize_shorter(img, size)
        return out.tobytes(), out.shape[0], out.shape[1], None, None, None
    h, w = img.shape[:2]
    if max_size is not None and max(h, w) > max_size:
        from PIL import Image

        s = max_size / max(h, w)
        img = np.asarray(Image.fromarray(img).resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR))
    img = np.ascontiguousarray(img)
    data = simplejpeg.encode_jpeg(img, quality=quality, colorspace="RGB", colorsubsampling="420")
    return data, img.shape[0], img.shape[1], None, note, None


def _pool_init() -> None:
    torch = sys.modules.get("torch")  # only when the parent already imported it (never import it here)
    if torch is not None:
        torch.set_num_threads(1)


def pack(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    config: PackConfig | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Pack one ImageFolder into a shard directory (atomically: written to ``DST.partial`` then renamed).

    Args:
        src: ImageFolder root (``src/<class>/<image>``).
        dst: output directory (must not exist unless ``overwrite``).
        config: :class:`PackConfig`; or pass its fields as keyword arguments.
        overwrite: replace an existing ``dst``.
        progress: ``(done, total)`` callback.

    Returns:
        The pack report (also written to ``dst/pack_report.json``): counts, skipped files with
        reasons, re-encoded files, bytes, seconds.

    Raises:
        SourceError: ``src`` is unreadable / not an ImageFolder / every file is corrupt.
        FileExistsError: ``dst`` exists and ``overwrite`` is False.
    """
    cfg = config or PackConfig(**kwargs)
    from torchport.storage import fs

    if fs.remote(dst):  # s3:// or obs://: pack into a local staging directory, then upload (manifest last)
        return _pack_to_store(src, str(dst), cfg=cfg, overwrite=overwrite, progress=progress)
    from torchport.train.lock import output_lock

    src, dst = Path(src), Path(dst)
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
    except OSError:                              # a destination under a file: the writer reports it (exit 6)
        return _pack_local(src, dst, cfg, overwrite, progress)
    with output_lock(dst, what="data pack"):     # one writer of DST.partial: a second pack exits 9 naming the first
        return _pack_local(src, dst, cfg, overwrite, progress)


def _pack_local(src: Path, dst: Path, cfg: PackConfig, overwrite: bool, progress) -> dict[str, Any]:
    classes, items = scan_image_folder(src)
    if dst.exists() and not overwrite:
        raise FileExistsError(f"{dst} already exists; choose another destination or pass --overwrite")
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    writer = ShardWriter(
        tmp,
        mode=cfg.mode,
        classes=classes,
        shard_bytes=cfg.shard_bytes,
        meta={
            "size": cfg.size if cfg.mode == "predecoded" else None,
            "max_size": cfg.max_size,
            "quality": cfg.quality,
            "source": str(src.resolve()),
        },
    )
    skipped: list[dict[str, str]] = []
    reencoded: list[dict[str, str]] = []
    per_class = [0] * len(classes)
    restarts = 0
    tasks = [(p, cfg.mode, cfg.size, cfg.max_size, cfg.quality, cfg.restart_markers) for p, _ in items]
    workers = max(1, cfg.workers if cfg.workers is not None else (os.cpu_count() or 1))
    ctx = mp.get_context("fork") if hasattr(os, "fork") else mp.get_context()
    pool = ctx.Pool(workers, initializer=_pool_init) if workers > 1 and len(tasks) > 16 else None
    try:
        results = pool.imap(_encode_one, tasks, chunksize=8) if pool else map(_encode_one, tasks)
        for n, ((path, label), (payload, h, w, err, note, rst)) in enumerate(zip(items, results), 1):
            if err is not None:
                skipped.append({"path": path, "reason": err})
            else:
                writer.add(payload, label=label, height=h, width=w)
                per_class[label] += 1
                restarts += rst
                if note:
                    reencoded.append({"path": path, "reason": note})
            if progress:
                progress(n, len(items))
    finally:
        if pool:
            pool.close()
            pool.join()
    if len(skipped) == len(items):
        shutil.rmtree(tmp, ignore_errors=True)
        raise SourceError(f"every file under {src} failed to decode (first: {skipped[0]['path']}: {skipped[0]['reason']})")
    manifest = writer.close()
    # broken links where class folders are expected: reported, never silently dropped
    links = [{"path": p, "reason": "broken symbolic link (missing target or a loop): not a class folder"}
             for p in broken_links(src)]
    # links out of the source (their bytes would land in the shards) and folder links back onto it (loops)
    links += [{"path": p, "reason": why} for p, why in refused_links(src)]
    report = {
        "source": str(src),
        "destination": str(dst),
        "mode": cfg.mode,
        "config": dataclasses.asdict(cfg),
        "files_seen": len(items),
        "written": manifest["num_samples"],
        "skipped": len(skipped) + len(links),
        "skipped_files": links + skipped,
        "reencoded": len(reencoded),
        "reencoded_files": reencoded,
        "restart_markers": restarts,
        "per_class": dict(zip(classes, per_class)),
        "shards": len(manifest["shards"]),
        "bytes": int(sum(s["bytes"] for s in manifest["shards"])),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    (tmp / "pack_report.json").write_text(json.dumps(report, indent=2) + "\n")
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    return report


def _pack_to_store(src, url: str, *, cfg: PackConfig, overwrite: bool, progress) -> dict[str, Any]:
    """Pack to a temp directory (``TORCHPORT_STORAGE_STAGING`` or the system temp dir), upload, clean up."""
    import tempfile

    from torchport.storage import store
    from torchport.storage.shards import upload_shard_dir

    store.split_url(url)  # a malformed URL fails before any work
    if store.exists(store.join(url, "index.json")) and not overwrite:
        raise FileExistsError(f"{url} already holds a shard set; choose another destination or pass --overwrite")
    staging = tempfile.mkdtemp(prefix="torchport-pack-", dir=os.environ.get("TORCHPORT_STORAGE_STAGING"))
    try:
        local = Path(staging) / "shards"
        report = pack(src, local, config=cfg, overwrite=True, progress=progress)
        report["destination"] = url
        (local / "pack_report.json").write_text(json.dumps(report, indent=2) + "\n")
        upload_shard_dir(local, url, overwrite=overwrite)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def pack_splits(src: str | os.PathLike, dst: str | os.PathLike, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """Pack ``src`` -- either one ImageFolder, or ``src/train`` + ``src/val`` into ``dst/train`` + ``dst/val``.

    Returns ``{split name or "": report}``. Keyword arguments go to :func:`pack`.
    """
    splits = split_dirs(src)
    if not splits:
        return {"": pack(src, dst, **kwargs)}
    from torchport.storage import fs

    if not fs.remote(dst):
        Path(dst).mkdir(parents=True, exist_ok=True)
    return {s: pack(Path(src) / s, fs.join(dst, s), **kwargs) for s in splits}
