"""One filesystem layer: the same few operations on a local path and on an ``s3://`` / ``obs://`` URL.

A path option is resolved once, at the edge (:func:`torchport.paths.resolve`: a :class:`~pathlib.Path`
or a store URL string). Code below the edge calls the operations here -- read, atomic write, list,
exists, remove, digest, join -- and never asks "is this a URL?" itself: this module (with
:mod:`torchport.paths`) is the only place that question is answered. Store operations go through
:mod:`torchport.storage.store` (retries, one-line errors); local ones through the OS.

Where behaviour, not just I/O, differs between the two (the one-writer lock is an ``flock`` on disk
and a conditional-PUT lease in a bucket; a loader memory-maps local shards and streams remote ones),
the caller picks with :func:`remote` -- one named policy point, not a re-derived string test.

Example::

    from torchport.storage import fs
    d = fs.location("runs/a/checkpoints")      # Path("runs/a/checkpoints")   (or "s3://b/ckpt" as given)
    fs.write_atomic(fs.join(d, "latest.json"), b"{}")
    fs.read_bytes(fs.join(d, "latest.json"))   # b"{}" (None when missing)
    fs.listdir(d)                              # ["latest.json"]
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from torchport.paths import is_url as _is_url

__all__ = ["remote", "location", "join", "name", "parent", "key", "read_bytes", "write_atomic", "exists",
           "is_dir", "listdir", "files", "remove", "remove_tree", "digest", "check_reachable"]


def remote(path: Any) -> bool:
    """True when ``path`` lives in an object store (``s3://`` / ``obs://``): the one local-or-URL answer."""
    return _is_url(path)


def location(path: Any) -> Path | str:
    """``path`` in its canonical form: the URL string (no trailing ``/``) for the store, a ``Path`` on disk."""
    return str(path).rstrip("/") if _is_url(path) else Path(path)


def join(base: Any, *parts: str) -> Path | str:
    """``base / part / ...`` -- a ``Path`` on disk, a URL string in the store."""
    if _is_url(base):
        from torchport.storage import store

        return store.join(str(base), *parts)
    return Path(base).joinpath(*parts)


def name(path: Any) -> str:
    """The last component of ``path``."""
    return str(path).rstrip("/").rsplit("/", 1)[-1] if _is_url(path) else Path(path).name


def parent(path: Any) -> Path | str:
    """One level up (never above a bucket)."""
    if _is_url(path):
        from torchport.storage import store

        return store.parent(str(path))
    return Path(path).parent


def key(path: Any) -> str:
    """A string naming the same place for every spelling of it (a resolved local path; the URL as is)."""
    return str(path).rstrip("/") if _is_url(path) else str(Path(path).resolve())


def read_bytes(path: Any, *, missing_ok: bool = False) -> bytes | None:
    """The whole file / object; None when it does not exist and ``missing_ok``.

    Raises:
        FileNotFoundError: missing on disk (unless ``missing_ok``); StorageError: the store's one-line error.
    """
    if _is_url(path):
        from torchport.storage import store

        fs, p = store._path(str(path))
        return store.call(lambda: fs.cat_file(p), str(path), what="read", missing_ok=missing_ok)
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise


def write_atomic(path: Any, data: bytes) -> None:
    """Replace ``path`` with ``data`` as one step: a single PUT in the store, a temp file renamed on disk."""
    if _is_url(path):
        from torchport.storage import store

        store.write_bytes(str(path), data)
        return
    from torchport.runtime.checkpoint import atomic_file

    with atomic_file(Path(path)) as fh:
        fh.write(data)


def exists(path: Any) -> bool:
    """True when ``path`` is an existing file (disk) / object (store; a prefix is not an object)."""
    if _is_url(path):
        from torchport.storage import store

        return store.exists(str(path))
    return Path(path).is_file()


def is_dir(path: Any) -> bool:
    """True for an existing local directory, or a store prefix with something under it."""
    if _is_url(path):
        return bool(listdir(path))
    return Path(path).is_dir()


def listdir(path: Any) -> list[str]:
    """Names directly under ``path``, sorted; ``[]`` when it does not exist."""
    if _is_url(path):
        from torchport.storage import store

        return store.listdir(str(path))
    d = Path(path)
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def files(path: Any) -> list[str]:
    """Every file under ``path`` (relative names, sorted; a local directory: its files, not sub-directories)."""
    if _is_url(path):
        from torchport.storage import store

        fs, p = store._path(str(path))
        found = store.call(lambda: fs.find(p), str(path), what="list", missing_ok=True) or []
        return sorted(f[len(p):].lstrip("/") for f in found)
    d = Path(path)
    return sorted(f.name for f in d.iterdir() if f.is_file()) if d.is_dir() else []


def remove(path: Any) -> None:
    """Delete one file / object (no error when it is already gone)."""
    if _is_url(path):
        from torchport.storage import store

        store.remove(str(path))
        return
    Path(path).unlink(missing_ok=True)


def remove_tree(path: Any) -> None:
    """Delete a directory / every object under a prefix (no error when it is gone)."""
    if _is_url(path):
        from torchport.storage import store

        store.remove_prefix(str(path))
    else:
        shutil.rmtree(path, ignore_errors=True)


def digest(path: Any) -> tuple[str, int]:
    """``(sha256 hex, size in bytes)`` of one file / object."""
    h = hashlib.sha256()
    if _is_url(path):
        from torchport.storage import store

        data = store.read_bytes(str(path))
        h.update(data)
        return h.hexdigest(), len(data)
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def check_reachable(path: Any) -> None:
    """Fail now, in one line, when the store behind ``path`` cannot be used (missing bucket, denied,
    unreachable); a no-op for a local path (its problems surface as ``OSError`` where it is written)."""
    if _is_url(path):
        from torchport.storage import store

        store.check_bucket(str(path))
