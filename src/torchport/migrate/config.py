"""``[tool.torchport]`` in ``pyproject.toml`` (or a ``torchport.toml``): the scanner's settings, found like ruff's.

``torchport scan`` / ``fix`` look, from the first path given (or the current directory) upward, for the
closest directory with a ``torchport.toml`` (the keys at its top level, like ``ruff.toml``) or a
``pyproject.toml`` that has a ``[tool.torchport]`` table (``torchport.toml`` wins in the same directory);
``--config FILE`` names one, ``--isolated`` ignores them all. Command-line options win over the file:
``--select`` replaces ``select`` (``--extend-select`` adds), ``--ignore`` adds to ``ignore``, ``--exclude``
adds to ``extend-exclude``, ``--unsafe-fixes`` turns on what the file may leave off, ``--emit`` replaces
``emit``, ``--cache-dir`` replaces ``cache-dir``.

Example::

    [tool.torchport]
    select = ["TP1", "TP2"]              # default: every rule but the noisy TP9xx
    extend-select = ["TP901"]            # added to select (or to the default set)
    ignore = ["TP109"]                   # extend-ignore: the same, for ruff's spelling
    extend-exclude = ["third_party/", "**/gen_*.py"]
    exclude = [".git/", "build/"]        # replaces the default folders never entered (.git, .venv, ...)
    extend-include = ["*.pyw", "*.ipy"]  # more suffixes a walk takes (".ipynb"-like ones as notebooks)
    unsafe-fixes = false
    emit = "torch"                       # what fixes write: "torchport" (default) or "torch"
    cache-dir = ".cache/torchport"       # the scan cache (default .torchport_cache beside this file)

    [tool.torchport.per-file-ignores]
    "tests/**" = ["TP1"]
    "__init__.py" = ["TP101"]

Patterns use gitignore syntax: one without a ``/`` matches at any depth, one with a ``/`` is relative
to the directory of the ``pyproject.toml``. Unknown keys are errors (:class:`ConfigError`, exit 2).

Example::

    from torchport.migrate.config import load_config
    cfg = load_config(["src"])
    cfg.select, cfg.path            # (), PosixPath('/repo/pyproject.toml')
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from torchport.errors import ConfigError

#: what fixes write: the torchport runtime, or torch core where torch has the API (:mod:`torchport.migrate.emit`)
EMITS = ("torchport", "torch")

__all__ = ["Config", "load_config", "find_config", "read_config", "KEYS"]

#: Every key ``[tool.torchport]`` accepts (TOML spelling).
KEYS = ("select", "extend-select", "ignore", "extend-ignore", "exclude", "extend-exclude", "extend-include",
        "per-file-ignores", "unsafe-fixes", "emit", "cache-dir")
#: the standalone file's name (its keys at the top level)
STANDALONE = "torchport.toml"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The scanner settings of one ``[tool.torchport]`` table (empty when none was found).

    Args:
        select: rule codes / prefixes / names (empty: the default set).
        extend_select: added to ``select`` (or to the default set).
        ignore: rule codes / prefixes / names removed from the selection (``extend-ignore`` included).
        exclude: patterns that replace the default folders a walk never enters, or None (the defaults).
        extensions: ``(suffix, language)`` pairs from ``extend-include`` (``"pyw"``, ``"python"``).
        cache_dir: the scan cache's folder (absolute), or None (the default place).
        extend_exclude: gitignore-style patterns of paths to skip, already anchored for the runner
            (a pattern with a ``/`` is made absolute under :attr:`root`).
        per_file_ignores: ``(absolute pattern root, pattern, codes)`` triples.
        unsafe_fixes: apply unsafe fixes by default.
        emit: what fixes write (``"torchport"`` or ``"torch"``), None when the file does not say.
        path: the ``pyproject.toml`` read, or None.
    """

    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    cache_dir: Path | None = None
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    unsafe_fixes: bool = False
    emit: str | None = None
    path: Path | None = None

    @property
    def root(self) -> Path | None:
        """The directory the patterns are relative to (the ``pyproject.toml``'s)."""
        return self.path.parent if self.path is not None else None


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


def _table(path: Path) -> Mapping[str, Any] | None:
    """The ``[tool.torchport]`` table of ``path`` (None when it has none); all of a ``torchport.toml``."""
    try:
        from torchport._parse import loads

        data = loads(path.read_bytes(), fmt="toml", what=str(path))
    except OSError as exc:
        raise ConfigError(f"{path}: could not read: {exc.strerror or exc}") from None
    except ValueError as exc:   # tomllib.TOMLDecodeError
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or pass --isolated") from None
    if path.name == STANDALONE:
        return data
    table = data.get("tool", {}).get("torchport")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchport] must be a table")
    return table


def find_config(start: str | os.PathLike) -> Path | None:
    """The closest ``torchport.toml``, or ``pyproject.toml`` with a ``[tool.torchport]`` table, from ``start`` up."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for d in (here, *here.parents):
        if (d / STANDALONE).is_file():
            return d / STANDALONE
        candidate = d / "pyproject.toml"
        if candidate.is_file() and _table(candidate) is not None:
            return candidate
    return None


def _strings(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.torchport] {key} must be a list of strings, e.g. {key} = [\"TP1\"]")
    return tuple(v.strip() for v in value if v.strip())


def _anchor(root: Path, pattern: str) -> str:
    """A pattern with a ``/`` (not only a trailing one) is relative to ``root``: make it absolute."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    if "/" in body.rstrip("/") and not os.path.isabs(body):
        body = (root / body.lstrip("/")).as_posix() + ("/" if body.endswith("/") else "")
    return ("!" if negated else "") + body


def read_config(path: str | os.PathLike) -> Config:
    """The settings in ``path`` (a ``pyproject.toml`` or ``torchport.toml``); empty when it has no table.

    Raises:
        ConfigError: unreadable or invalid file, unknown key, wrong value type (one line naming it).
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file; name a torchport.toml, or a pyproject.toml with a "
                          "[tool.torchport] table")
    table = _table(path)
    if table is None:
        return Config(path=path)
    where = path.name if path.name == STANDALONE else "[tool.torchport]"
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in {where}; known keys: {', '.join(KEYS)}")
    root = path.parent
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{path}: [tool.torchport.per-file-ignores] must map patterns to lists of codes")
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{path}: [tool.torchport] unsafe-fixes must be true or false")
    emit = table.get("emit")
    if emit is not None and emit not in EMITS:
        raise ConfigError(f"{path}: [tool.torchport] emit must be one of {', '.join(repr(e) for e in EMITS)}, "
                          f"not {emit!r}")
    cache_dir = table.get("cache-dir")
    if cache_dir is not None and not (isinstance(cache_dir, str) and cache_dir.strip()):
        raise ConfigError(f"{path}: {where} cache-dir must be a folder name, e.g. cache-dir = \".torchport_cache\"")
    exclude = table.get("exclude")
    return Config(
        select=_strings(path, "select", table.get("select", [])),
        extend_select=_strings(path, "extend-select", table.get("extend-select", [])),
        ignore=_strings(path, "ignore", table.get("ignore", [])) + _strings(path, "extend-ignore",
                                                                            table.get("extend-ignore", [])),
        exclude=None if exclude is None else tuple(_anchor(root, p) for p in _strings(path, "exclude", exclude)),
        extensions=tuple(_include(path, p) for p in _strings(path, "extend-include", table.get("extend-include", []))),
        cache_dir=None if cache_dir is None else (root / cache_dir).resolve(),
        extend_exclude=tuple(_anchor(root, p) for p in _strings(path, "extend-exclude",
                                                                 table.get("extend-exclude", []))),
        per_file_ignores=tuple((root.as_posix(), pattern, _strings(path, f"per-file-ignores {pattern!r}", codes))
                               for pattern, codes in pfi.items()),
        unsafe_fixes=unsafe,
        emit=emit,
        path=path,
    )


def _include(path: Path, pattern: str) -> tuple[str, str]:
    """An ``extend-include`` entry (``"*.pyw"``) as ``(suffix, language)``; notebooks' suffix ``.ipynb``."""
    suffix = pattern[2:] if pattern.startswith("*.") else pattern.lstrip(".")
    if not suffix or any(c in suffix for c in "/*?[") or suffix != pattern.rsplit(".", 1)[-1]:
        raise ConfigError(f"{path}: extend-include entry {pattern!r}: give a suffix pattern such as \"*.pyw\"")
    return suffix.lower(), "ipynb" if suffix.lower() == "ipynb" else "python"


def load_config(paths: Sequence[str | os.PathLike] = (), *, config: str | os.PathLike | None = None,
                isolated: bool = False) -> Config:
    """The settings for a run over ``paths``: ``config`` when given, else the closest one from the first
    path upward (the current directory when there is none); an empty :class:`Config` with ``isolated``."""
    if isolated:
        return Config()
    if config is not None:
        return read_config(config)
    start = next((p for p in paths if str(p) != "-"), None) or os.getcwd()
    found = find_config(start if Path(start).exists() else os.getcwd())
    return read_config(found) if found is not None else Config()
