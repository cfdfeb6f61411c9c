"""Helpers for the trainer tests: run ``torchport train`` in a subprocess, read its metrics.

Subprocess runs are the honest test of a CLI that must survive SIGKILL and fresh processes; they
use 1 thread (the machine is small and shared) and a private cache dir.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchport.train.metrics import read_jsonl, step_losses  # noqa: F401  (step_losses: re-exported to the tests)

PY = sys.executable

#: Small, fast settings shared by the end-to-end tests (tinycnn, 32 px, 8 images per batch).
TINY = ["--model", "tinycnn", "--image-size", "32", "--batch-size", "8", "--lr", "0.02",
        "--warmup-epochs", "0", "--progress", "plain"]


def emulator_usable() -> str | None:
    """None when ``TORCHPORT_EMULATE=npu`` gives a working npu in a fresh process, else why not."""
    if not hasattr(emulator_usable, "_cached"):
        code = "import torch; x = torch.ones(2, device='npu'); print((x + 1).sum().item())"
        try:
            out = subprocess.run([PY, "-c", code], env={**os.environ, "TORCHPORT_EMULATE": "npu"},
                                 capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            emulator_usable._cached = "emulated npu did not answer within 180 s (a hang is a failure, not a skip)"
        else:
            emulator_usable._cached = None if out.returncode == 0 and out.stdout.strip() == "4.0" else (
                "emulated npu unusable: " + (out.stderr.strip().splitlines() or ["no output"])[-1])
    return emulator_usable._cached


def needs_emulator():
    """Mark a test that needs the emulated npu in a subprocess: it FAILS (never skips) when the emulator
    does not work -- the emulator ships with torchport, so a broken one is a regression to see."""
    import functools

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            reason = emulator_usable()
            if reason is not None:
                pytest.fail(reason)
            return fn(*args, **kwargs)

        return wrapper

    return deco


#: The test-only ``torchport train`` that injects faults from outside the loop (tests/train/fault_train.py).
FAULT_TRAIN = str(Path(__file__).with_name("fault_train.py"))


def fault_cmd(*args: str) -> list[str]:
    """``python tests/train/fault_train.py ARGS``: ``torchport train ARGS`` + TORCHPORT_FAULT_* faults."""
    return [PY, FAULT_TRAIN, *map(str, args)]


def train_cmd(*args: str, module: str = "torchport.train") -> list[str]:
    """``python -m torchport.train ARGS`` (or ``-m torchport train`` with module="torchport")."""
    return [PY, "-m", module, *(["train"] if module == "torchport" else []), *map(str, args)]


def run(cmd: list[str], env: dict[str, str], timeout: float = 180, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def records(run_dir: Path, kind: str) -> list[dict]:
    return read_jsonl(Path(run_dir) / "metrics.jsonl", kind)
