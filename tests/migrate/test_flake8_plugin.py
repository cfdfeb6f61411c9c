"""The flake8 plugin: codes come out as TPTnnn (flake8 routes by the ``TPT`` entry-point prefix)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import subprocess
import sys


from torchport.migrate.flake8_plugin import TorchportFlake8

SRC = "import torch\n\nx = torch.zeros(1).cuda()\ny = y.cuda()  # noqa: TPT101\n"


def test_plugin_yields_flake8_tuples():
    lines = SRC.splitlines(keepends=True)
    out = list(TorchportFlake8(ast.parse(SRC), "t.py", lines).run())
    assert out == [(3, 4, out[0][2], TorchportFlake8)]
    assert out[0][2].startswith("TPT101 ") and out[0][2].endswith("[TP101 cuda-method]")


def test_entry_point_is_declared():
    eps = importlib.metadata.entry_points(group="flake8.extension")
    assert any(ep.name == "TPT" and ep.value == "torchport.migrate.flake8_plugin:TorchportFlake8" for ep in eps)


def test_flake8_runs_the_plugin(tmp_path):
    """flake8 is a dev dependency: a missing or broken flake8 fails here instead of skipping."""
    assert importlib.util.find_spec("flake8") is not None, "flake8 is not installed (pip install -e '.[dev]')"
    f = tmp_path / "t.py"
    f.write_text(SRC)
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "TPT", str(f)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip().splitlines() == [f"{f}:3:5: TPT101 `.cuda()` only targets CUDA devices; use "
                                                "`.to(torchport.device())` [TP101 cuda-method]"]
