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


def torchrun_two_npus(worker: str, out_dir: Path, timeout: int = 240) -> list[dict]:
    """Run ``tests/emulate/<worker>`` as 2 ranks under torchrun with ``TORCHPORT_EMULATE=npu:2``; each rank
    writes ``rank<N>.json`` into ``out_dir``. Returns those records (asserts the launch exited 0)."""
    import json

    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE"))}
    env.update({"TORCHPORT_EMULATE": "npu:2", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    cmd = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(here / worker),
           str(out_dir)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((Path(out_dir) / f"rank{r}.json").read_text()) for r in range(2)]
