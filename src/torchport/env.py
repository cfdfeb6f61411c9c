"""Typed environment variables: one parser for booleans and integers, one error naming the variable.

Example::

    from torchport.env import env_flag, env_int
    strict = env_flag("TORCHPORT_REQUIRE_ACCELERATOR")      # 1/0, true/false, yes/no, on/off
    rank = env_int("LOCAL_RANK", 0)
"""

from __future__ import annotations

import os

from torchport.errors import ConfigError

__all__ = ["env_flag", "env_int"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_flag(name: str, default: bool = False) -> bool:
    """Parse a boolean environment variable; raise :class:`ConfigError` naming it when malformed."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    val = raw.strip().lower()
    if val in _TRUE:
        return True
    if val in _FALSE:
        return False
    raise ConfigError(f"environment variable {name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def env_int(name: str, default: int | None = None) -> int | None:
    """Parse an integer environment variable; raise :class:`ConfigError` naming it when malformed."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
