"""The environment for a subprocess that must run as a user's would: no torchport settings from this shell --
except the CPU precision pin of tests/conftest.py, so ``--precision auto`` means the same (fp32) in the
subprocess as in the test that compares with it, on every machine (a native-bf16 CPU would otherwise pick bf16
on one side only)."""

from __future__ import annotations

import os


def clean_env(*drop: str, **updates: str) -> dict[str, str]:
    """``os.environ`` without ``TORCHPORT_*`` (the ``TORCHPORT_CPU_*`` pin kept) and without ``drop``, plus ``updates``."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("TORCHPORT_") or k.startswith("TORCHPORT_CPU_")) and k not in drop}
    env.update(updates)
    return env
