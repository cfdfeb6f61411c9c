"""Explicit backend registry: one ``register()`` line per built-in backend.

Third-party backends register through the ``torchport.backends`` entry-point group;
each entry point names a :class:`~torchport.backends.spec.BackendSpec` or a zero-argument
callable returning one. Entry points are loaded lazily, on first lookup.
"""

from __future__ import annotations

import difflib
import threading
from importlib import metadata
from torchport.backends.spec import BackendSpec

__all__ = [
    "register",
    "unregister",
    "get",
    "names",
    "specs",
    "UnknownBackendError",
    "DuplicateBackendError",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "torchport.backends"

_REGISTRY: dict[str, BackendSpec] = {}
_LOCK = threading.RLock()
_entry_points_loaded = False


class UnknownBackendError(ValueError):
    """Raised for a backend name nobody registered; lists the known ones."""

    exit_code = 2  # torchport.errors.ExitCode.USAGE


class DuplicateBackendError(ValueError):
    """Raised when two backends claim the same name without ``replace=True``."""


def register(spec: BackendSpec, *, replace: bool = False) -> BackendSpec | None:
    """Add ``spec`` to the registry and return the spec it replaced (or None).

    Args:
        spec: the backend record.
        replace: allow overriding an existing name (the emulator uses this and
            restores the previous record on uninstall).

    Raises:
        DuplicateBackendError: the name is taken and ``replace`` is False.
    """
    with _LOCK:
        previous = _REGISTRY.get(spec.name)
        if previous is not None and not replace:
            raise DuplicateBackendError(
                f"a backend named {spec.name!r} is already registered ({previous!r:.80}); "
                "pick another name, or pass replace=True to override it deliberately"
            )
        _REGISTRY[spec.name] = spec
        return previous


def unregister(name: str, *, restore: BackendSpec | None = None) -> None:
    """Remove ``name`` (or put ``restore`` back in its place)."""
    with _LOCK:
        if restore is not None:
            _REGISTRY[name] = restore
        else:
            _REGISTRY.pop(name, None)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        spec = obj() if callable(obj) and not isinstance(obj, BackendSpec) else obj
        if not isinstance(spec, BackendSpec):
            raise TypeError(
                f"entry point {ep.name!r} in group {ENTRY_POINT_GROUP!r} gave {type(spec).__name__}, "
                "expected a torchport.backends.BackendSpec (or a callable returning one)"
            )
        register(spec)


def get(name: str) -> BackendSpec:
    """Return the backend called ``name``.

    Raises:
        UnknownBackendError: with the list of known backends and a close match.
    """
    _load_entry_points()
    key = name.strip().lower().split(":", 1)[0]
    with _LOCK:
        spec = _REGISTRY.get(key)
        if spec is not None:
            return spec
        known = sorted(_REGISTRY)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownBackendError(f"unknown backend {name!r}; known backends: {', '.join(known)}.{hint}")


def names() -> list[str]:
    """Registered backend names, highest auto-selection priority first."""
    return [s.name for s in specs()]


def specs() -> list[BackendSpec]:
    """Registered backend records, highest auto-selection priority first."""
    _load_entry_points()
    with _LOCK:
        return sorted(_REGISTRY.values(), key=lambda s: -s.priority)
