"""The trainer's own errors, below every trainer module (the loop, the strategies and the run directory import
them; this module imports none of those)."""

from __future__ import annotations

from torchport.errors import ExitCode

__all__ = ["NonFiniteLossError"]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf (beyond what loss scaling absorbs); training stopped, checkpoints kept."""

    exit_code = ExitCode.DIVERGED
