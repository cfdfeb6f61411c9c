"""Lazy package façades: public names are imported from their modules on first use.

Keeps ``import torchport.<package>`` free of heavy imports (torch, libcst) and side effects.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Build ``__getattr__``, ``__dir__`` and ``__all__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        exports: public name -> module that defines it.

    Example::

        __getattr__, __dir__, __all__ = lazy_exports(__name__, {"Amp": "torchport.runtime.amp"})
    """
    names = sorted(exports)

    def __getattr__(name: str) -> Any:
        mod = exports.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(mod), name)
        setattr(sys.modules[package], name, value)  # cache: the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__, names
