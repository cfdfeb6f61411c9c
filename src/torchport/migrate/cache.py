"""The scan cache: a file whose content, settings and torchport are unchanged is not analysed again.

Like ``.ruff_cache``: a folder (default ``.torchport_cache`` beside the ``pyproject.toml`` in use, else in the
current directory; ``--cache-dir`` / ``cache-dir`` / ``TORCHPORT_CACHE_DIR``; ``--no-cache`` to bypass) holding
one JSON file per set of settings, named by a hash of

* torchport's version and a fingerprint of the scanner's own code (size and modification time of every file
  under ``torchport/migrate``: an edited rule in a development checkout invalidates the cache too),
* the resolved settings that shape a result: ``select``, ``ignore``, ``emit`` (what messages recommend);

and inside it one entry per file, keyed by a hash of the file's bytes and the per-file ignores that apply to
it: lines, whether it was analysed, and its findings. A path is not part of the key (a moved file hits) and is
put back into each finding on the way out. Files that could not be read or analysed are never cached.

The folder has a ``.gitignore`` (``*``) and a ``CACHEDIR.TAG``, so git and backup tools leave it alone. A cache
that cannot be read or written is ignored (one debug line): the scan is then only slower.

Example::

    cache = Cache.open(".torchport_cache", settings=("TP1",), emit="torchport")
    hit = cache.get(digest(data, ()))          # a FileResult-shaped record, or None
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from torchport.migrate.finding import FileResult, Finding

__all__ = ["Cache", "digest", "fingerprint", "DEFAULT_DIR"]

DEFAULT_DIR = ".torchport_cache"
#: entries kept from earlier runs at most (a run's own entries are always kept)
_MAX_ENTRIES = 50_000
_FIELDS = ("line", "column", "end_line", "end_column", "code", "name", "message", "severity", "fix_safety", "cell")
_LOG = logging.getLogger("torchport.migrate.cache")
_FINGERPRINT: str | None = None


def fingerprint() -> str:
    """torchport's version and the size + mtime of every ``torchport/migrate`` source file, hashed."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        from torchport import __version__

        root = Path(__file__).parent
        h = hashlib.blake2b(__version__.encode(), digest_size=16)
        for folder in (root, root / "rules"):
            with os.scandir(folder) as it:
                for entry in sorted(it, key=lambda e: e.name):
                    if entry.name.endswith(".py"):
                        st = entry.stat()
                        h.update(f"{folder.name}/{entry.name}:{st.st_size}:{st.st_mtime_ns};".encode())
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


def digest(data: bytes, extra_ignore: Sequence[str]) -> str:
    """The entry key of one file: its bytes and the per-file ignores that apply to it."""
    h = hashlib.blake2b(data, digest_size=16)
    h.update(("\0" + ",".join(extra_ignore)).encode())
    return h.hexdigest()


class Cache:
    """One settings' entries, loaded at the start of a run and saved (merged, atomically) at its end."""

    def __init__(self, path: Path | None, entries: dict[str, Any]) -> None:
        self.path, self._old, self._new = path, entries, {}
        self.hits = self.misses = 0
        self._dirty = False

    @classmethod
    def open(cls, folder: str | os.PathLike, *, select: Sequence[str], ignore: Sequence[str], emit: str) -> "Cache":
        """The cache for these settings under ``folder`` (empty when there is none yet)."""
        key = hashlib.blake2b(json.dumps([fingerprint(), list(select), list(ignore), emit]).encode(),
                              digest_size=12).hexdigest()
        path = Path(folder) / f"scan-{key}.json"
        entries: dict[str, Any] = {}
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            entries = data["files"] if isinstance(data, dict) and isinstance(data.get("files"), dict) else {}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            _LOG.debug("scan cache %s not read (%s); starting empty", path, exc)
        return cls(path, entries)

    @property
    def known(self) -> bool:
        """True when an earlier run with these settings saved entries (its ``select`` / ``ignore`` were valid)."""
        return bool(self._old)

    def get(self, key: str, path: str) -> FileResult | None:
        """The cached result for entry ``key``, shown as ``path``; None on a miss."""
        rec = self._new.get(key) or self._old.get(key)
        if rec is None:
            self.misses += 1
            return None
        self.hits += 1
        self._new[key] = rec
        lines, analysed, findings = rec
        return FileResult(path=path, lines=lines, analysed=analysed,
                          findings=[Finding(path=path, **dict(zip(_FIELDS, f))) for f in findings])

    def put(self, key: str, result: FileResult) -> None:
        """Remember ``result`` (not when it carries an error or a rewrite)."""
        if result.error is not None or result.fixed_source is not None or any(f.fixed for f in result.findings):
            return
        self._new[key] = [result.lines, result.analysed,
                          [[getattr(f, name) for name in _FIELDS] for f in result.findings]]
        self._dirty = True

    def save(self) -> None:
        """Write this run's entries (and earlier ones, up to a bound) back, atomically; quiet on failure."""
        if self.path is None or not self._dirty:
            return
        merged = dict(self._old) if len(self._old) + len(self._new) <= _MAX_ENTRIES else {}
        merged.update(self._new)
        folder = self.path.parent
        tmp = None
        try:
            if not folder.is_dir():
                folder.mkdir(parents=True, exist_ok=True)
                (folder / ".gitignore").write_text("# created by torchport: the scan cache\n*\n", encoding="utf-8")
                (folder / "CACHEDIR.TAG").write_text(
                    "Signature: 8a477f597d28d172789f06886806bc55\n# torchport's scan cache (bford.info/cachedir)\n",
                    encoding="utf-8")
            fd, tmp = tempfile.mkstemp(prefix=".scan-", suffix=".tmp", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"torchport": fingerprint(), "files": merged}, fh, separators=(",", ":"))
            os.replace(tmp, self.path)
            tmp = None
        except OSError as exc:
            _LOG.debug("scan cache not written to %s (%s)", folder, exc)
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
