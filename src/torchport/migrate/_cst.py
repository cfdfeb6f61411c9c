"""LibCST, imported on first use: ``from torchport.migrate._cst import cst`` stands for ``import libcst as cst``.

The rules' declarations (names, methods, strings ...), the text prefilter and the ``ast`` marks of the fast scan
(:mod:`torchport.migrate.fast`) need no LibCST, and importing it costs ~0.3 s of CPU in every process (hundreds
of node dataclasses). The modules that hold rules import this stand-in instead: the first attribute read
(``cst.Call``, ``isinstance(node, cst.Name)`` in a hook) imports LibCST and copies its namespace in, so every
later read is a plain module attribute. Modules that only run in a LibCST pass (the engine, the positions, the
fixes' import edits) import LibCST directly. ``tests/migrate/test_lazy_libcst.py`` checks that a scan whose files
reach no LibCST pass never imports it.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

__all__ = ["cst"]


class _LazyLibCST(types.ModuleType):
    """A module object that becomes LibCST's namespace on the first attribute read."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):     # dunder probes (copy, pickle, inspect) do not import LibCST
            raise AttributeError(name)
        real = importlib.import_module("libcst")
        self.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'libcst' has no attribute {name!r}") from None


if TYPE_CHECKING:  # pragma: no cover - type checkers see LibCST itself
    import libcst as cst
else:
    cst = _LazyLibCST("libcst", "LibCST, imported on first attribute read (torchport.migrate._cst)")
