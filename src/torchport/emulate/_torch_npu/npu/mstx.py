"""``torch_npu.npu.mstx`` (emulated): MindStudio tracing markers -- documented no-ops (no msprof here)."""

import contextlib

__torchport_emulated__ = True
__all__ = ["mark", "range_start", "range_end", "mstx_range"]
_next = [0]


def mark(message: str = "", stream=None, domain: str = "default") -> None:
    """No-op on the emulator (a marker in the msprof timeline on a card)."""


def range_start(message: str = "", stream=None, domain: str = "default") -> int:
    """Returns a range id (non-zero, like torch_npu); nothing is recorded."""
    _next[0] += 1
    return _next[0]


def range_end(range_id: int, domain: str = "default") -> None:
    """No-op on the emulator."""


def mstx_range(message: str = "", stream=None, domain: str = "default"):
    """Decorator / context manager form; no-op on the emulator."""
    return contextlib.nullcontext()
