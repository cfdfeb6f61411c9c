"""End to end: the realistic CUDA-only training script is fixed, then trains unmodified.

``tests/fixtures/cuda_train_script.py`` is rewritten by ``torchport fix --write
--unsafe-fixes`` into a temp dir; the result must contain no CUDA-only construct that
has a fix, and must train 2 steps (printing finite losses) and round-trip its checkpoint
on every ``portable_device``: cpu, the emulated npu, and cuda where a GPU exists.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migrate_helpers import REPO
from torchport.cli.main import app
from torchport.migrate import scan_source
from clean_env import clean_env

SCRIPT = REPO / "tests" / "fixtures" / "cuda_train_script.py"


@pytest.fixture(scope="module")
def fixed_script(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fixed") / "train.py"
    shutil.copy(SCRIPT, out)
    res = CliRunner().invoke(app, ["fix", str(out), "--write", "--unsafe-fixes", "--format", "json"])
    # exit 0: every finding of this script has a fix (its `nn.DataParallel` branch became torchport.compat's)
    assert res.exit_code == 0, res.output
    return out


def test_fixed_script_is_device_agnostic(fixed_script):
    text = fixed_script.read_text()
    code = text.split('"""', 2)[2]  # the module docstring describes the CUDA version
    assert "import torchport" in code
    for construct in (".cuda(", "torch.cuda.amp", '"nccl"', 'map_location="cuda', "torch.cuda.synchronize",
                      'torch.device("cuda', "pin_memory=True"):
        assert construct not in code, construct
    left = scan_source(text).findings
    # cudnn.benchmark -> torchport.tune; nn.DataParallel -> torchport.compat.DataParallel (DataParallel's own
    # state_dict keys and `.module`, one device where the backend has no DataParallel; issue 30)
    assert left == [], [(f.line, f.code) for f in left]
    assert "model = torchport.compat.DataParallel(model.to(torchport.device()))" in code
    assert "model.module.state_dict() if isinstance(model, (DDP, nn.DataParallel))" in code


def test_fixed_script_trains(fixed_script, portable_device, tmp_path):
    """Runs in a fresh interpreter so the script sees a clean process (as a user would run it)."""
    kind = portable_device.type
    env = clean_env()
    env["TORCHPORT_DEVICE"] = kind
    if kind == "npu":
        env["TORCHPORT_EMULATE"] = "npu"
    ckpt = tmp_path / "ckpt.pt"
    proc = subprocess.run([sys.executable, str(fixed_script), "--steps", "2", "--checkpoint", str(ckpt)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"device: {kind}" in proc.stdout
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), proc.stdout
    assert "reloaded checkpoint step 2" in proc.stdout and "done" in proc.stdout
    assert ckpt.exists()
