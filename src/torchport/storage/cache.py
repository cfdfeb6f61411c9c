"""A bounded local cache of object blocks, shared by every process on a node.

Blocks are files ``<root>/<key[:2]>/<key>``; ``key`` comes from the caller (content-addressed for
shards: the shard's sha256 from the manifest plus the block number, so a re-packed data set never
reads a stale block). Safe under several DataLoader workers and several ranks:

* a block is downloaded to a temp file and **renamed** into place (readers never see half a block);
* one ``flock`` per block makes concurrent misses download it once (the others wait, then read);
* eviction (least recently used by mtime, touched on every hit) runs under a cache-wide ``flock``
  when the total exceeds ``limit_bytes``; a reader whose block was evicted between the check and
  the open simply fetches it again.

Configuration: ``TORCHPORT_STORAGE_CACHE`` (directory, default ``$TORCHPORT_CACHE/objects`` or
``~/.cache/torchport/objects``), ``TORCHPORT_STORAGE_CACHE_GB`` (size limit, default 20).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path
from typing import Callable

__all__ = ["BlockCache", "default_cache_dir", "default_limit"]


def default_cache_dir() -> Path:
    """``TORCHPORT_STORAGE_CACHE`` or ``<torchport cache>/objects``."""
    env = os.environ.get("TORCHPORT_STORAGE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("TORCHPORT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "torchport")
    return Path(base) / "objects"


def default_limit() -> int:
    """``TORCHPORT_STORAGE_CACHE_GB`` (default 20 GiB) in bytes."""
    return int(float(os.environ.get("TORCHPORT_STORAGE_CACHE_GB") or 20) * (1 << 30))


@contextlib.contextmanager
def _flock(path: Path):
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class BlockCache:
    """Get-or-fetch of immutable blocks with a size limit.

    Args:
        root: cache directory (created).
        limit_bytes: evict least-recently-used blocks beyond this total.

    Example::

        cache = BlockCache("/tmp/c", limit_bytes=1 << 30)
        data = cache.read("abc-0", lambda: download(), 10, 20)   # bytes 10..20 of block "abc-0"
    """

    def __init__(self, root: str | os.PathLike | None = None, *, limit_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.limit = int(limit_bytes if limit_bytes is not None else default_limit())
        self.root.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._added = 0
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        """Where block ``key`` lives; a key that is not a plain file name (``../x``, a slash: a name derived from
        remote content) is refused, so nothing lands outside the cache."""
        from torchport.paths import plain_name

        if not plain_name(key) or key.startswith("."):
            from torchport.errors import StorageError

            raise StorageError(f"cache key {key[:80]!r} is not a plain file name (it came from remote content); "
                               "refused: nothing is written outside the cache")
        return self.root / key[:2] / key

    def contains(self, key: str) -> bool:
        return self.path(key).is_file()

    def _read(self, p: Path, start: int, end: int | None) -> bytes | None:
        try:
            with open(p, "rb") as f:
                if start:
                    f.seek(start)
                data = f.read(-1 if end is None else end - start)
        except FileNotFoundError:
            return None
        with contextlib.suppress(OSError):
            os.utime(p)  # LRU: the mtime is the last use
        return data

    def read(self, key: str, fetch: Callable[[], bytes], start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of block ``key``, calling ``fetch()`` for the whole block on a miss."""
        p = self.path(key)
        for _ in range(3):
            data = self._read(p, start, end)
            if data is not None:
                with self._lock:
                    self.hits += 1
                return data
            self.ensure(key, fetch)
        from torchport.errors import StorageError  # not an OSError: must never pass for one bad sample

        raise StorageError(f"cache block {p} vanished three times in a row; raise TORCHPORT_STORAGE_CACHE_GB "
                           "(the cache must hold at least the blocks of a few batches)")

    def ensure(self, key: str, fetch: Callable[[], bytes]) -> bool:
        """Make sure block ``key`` is cached (download it once across processes); True when fetched here."""
        p = self.path(key)
        if p.is_file():
            return False
        p.parent.mkdir(parents=True, exist_ok=True)
        with _flock(p.with_name(p.name + ".lock")):
            if p.is_file():  # another process fetched it while we waited
                return False
            data = fetch()
            tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        with self._lock:
            self.misses += 1
            self._added += len(data)
            added = self._added
        if added > max(self.limit // 16, 1 << 20):
            self._added = 0
            self.evict()
        return True

    def usage(self) -> int:
        """Bytes of cached blocks."""
        return sum(e.stat().st_size for d in self.root.iterdir() if d.is_dir() for e in os.scandir(d)
                   if e.is_file() and not e.name.endswith(".lock") and not e.name.startswith("."))

    def evict(self) -> int:
        """Delete least-recently-used blocks until the total is within the limit; returns bytes freed."""
        with _flock(self.root / ".evict.lock"):
            entries = []
            for d in self.root.iterdir():
                if not d.is_dir():
                    continue
                for e in os.scandir(d):
                    if e.is_file() and not e.name.endswith(".lock") and not e.name.startswith("."):
                        st = e.stat()
                        entries.append((st.st_mtime, st.st_size, e.path))
            total = sum(s for _, s, _ in entries)
            freed = 0
            for _, sz, path in sorted(entries):
                if total - freed <= self.limit:
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    freed += sz
            return freed
