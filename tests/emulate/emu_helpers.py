"""Helpers shared by the emulated-NPU tests (imported as ``emu_helpers``; pytest puts this folder on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def resnet18(seed: int = 0) -> torch.nn.Module:
    import torchvision

    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=10)


def run_python(code: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (the emulator's process-wide effects stay out of this one)."""
    full_env = {k: v for k, v in os.environ.items() if k != "TORCHPORT_EMULATE"}
    full_env.update(env or {})
    return subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=str(ROOT))
