"""Small helpers shared by the backend records (private)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def torch_module(attr: str) -> ModuleType | None:
    """``torch.<attr>`` if torch already exposes it (no import side effects beyond torch)."""
    import torch

    return getattr(torch, attr, None)


def installed(dist: str) -> bool:
    """True when ``dist`` can be imported (looked up without importing it)."""
    return dist in sys.modules or importlib.util.find_spec(dist) is not None
