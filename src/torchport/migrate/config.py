"""``[tool.torchport]`` in ``pyproject.toml``: the scanner's settings, found like ruff finds its own.

``torchport scan`` / ``fix`` look for the closest ``pyproject.toml`` that has a ``[tool.torchport]``
table, from the first path given (or the current directory) upward; ``--config FILE`` names one,
``--isolated`` ignores them all. Command-line options win over the file: ``--select`` replaces
``select``, ``--ignore`` adds to ``ignore``, ``--exclude`` adds to ``extend-exclude``,
``--unsafe-fixes`` turns on what the file may leave off, ``--emit`` replaces ``emit``.

Example::

    [tool.torchport]
    select = ["TP1", "TP2"]              # default: every rule but the noisy TP9xx
    ignore = ["TP109"]
    extend-exclude = ["third_party/", "**/gen_*.py"]
    unsafe-fixes = false
    emit = "torch"                       # what fixes write: "torchport" (default) or "torch"

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
KEYS = ("select", "ignore", "extend-exclude", "per-file-ignores", "unsafe-fixes", "emit")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The scanner settings of one ``[tool.torchport]`` table (empty when none was found).

    Args:
        select: rule codes / prefixes / names (empty: the default set).
        ignore: rule codes / prefixes / names removed from the selection.
        extend_exclude: gitignore-style patterns of paths to skip, already anchored for the runner
            (a pattern with a ``/`` is made absolute under :attr:`root`).
        per_file_ignores: ``(absolute pattern root, pattern, codes)`` triples.
        unsafe_fixes: apply unsafe fixes by default.
        emit: what fixes write (``"torchport"`` or ``"torch"``), None when the file does not say.
        path: the ``pyproject.toml`` read, or None.
    """

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
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
    """The ``[tool.torchport]`` table of ``path`` (None when it has none)."""
    try:
        data = _toml().loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: could not read: {exc.strerror or exc}") from None
    except ValueError as exc:   # tomllib.TOMLDecodeError
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or pass --isolated") from None
    table = data.get("tool", {}).get("torchport")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchport] must be a table")
    return table


def find_config(start: str | os.PathLike) -> Path | None:
    """The closest ``pyproject.toml`` with a ``[tool.torchport]`` table, from ``start`` upward."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for d in (here, *here.parents):
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
    """The settings in ``path`` (a ``pyproject.toml``); an empty :class:`Config` when it has no table.

    Raises:
        ConfigError: unreadable or invalid file, unknown key, wrong value type (one line naming it).
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file; name a pyproject.toml with a [tool.torchport] table")
    table = _table(path)
    if table is None:
        return Config(path=path)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in [tool.torchport]; known keys: {', '.join(KEYS)}")
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
    return Config(
        select=_strings(path, "select", table.get("select", [])),
        ignore=_strings(path, "ignore", table.get("ignore", [])),
        extend_exclude=tuple(_anchor(root, p) for p in _strings(path, "extend-exclude",
                                                                 table.get("extend-exclude", []))),
        per_file_ignores=tuple((root.as_posix(), pattern, _strings(path, f"per-file-ignores {pattern!r}", codes))
                               for pattern, codes in pfi.items()),
        unsafe_fixes=unsafe,
        emit=emit,
        path=path,
    )


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
