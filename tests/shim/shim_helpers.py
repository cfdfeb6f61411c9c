"""Helpers shared by the shim tests (imported by name: pytest puts this directory on sys.path)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_SCRIPT = ROOT / "tests" / "fixtures" / "cuda_train_script.py"


def emulator_reason() -> str | None:
    """None when torchport.emulate can install an emulated npu here, else why not (a test FAILS with
    it: the emulator ships with torchport, so an import error is a regression, never a skip)."""
    emulate = importlib.import_module("torchport.emulate")     # an import error fails the caller
    if not callable(getattr(emulate, "install", None)):
        return "torchport.emulate.install() is missing"
    return None


def require_emulator() -> None:
    """Fail the calling test when the emulator cannot be installed here."""
    import pytest

    reason = emulator_reason()
    if reason is not None:
        pytest.fail(reason)


def run_cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``python -m torchport ARGS`` in a fresh interpreter (device settings cleared)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("TORCHPORT_DEVICE", "TORCHPORT_REQUIRE_ACCELERATOR", "TORCHPORT_EMULATE",
                             "TORCHPORT_SHIM_REPORT", "TORCHPORT_RUN_CHILD", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    full_env["PYTHONWARNINGS"] = "default"
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "torchport", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def fixture_line(snippet: str) -> int:
    """1-based line of the first line in the fixture script containing ``snippet``."""
    for i, line in enumerate(FIXTURE_SCRIPT.read_text().splitlines(), 1):
        if snippet in line:
            return i
    raise AssertionError(f"{snippet!r} not found in {FIXTURE_SCRIPT}")


def install_fake_library(tmp_path: Path, monkeypatch, name: str, source: str):
    """Import ``source`` as package ``name`` from a ``site-packages`` directory, as pip would install it
    (library code to the shim); it leaves ``sys.modules`` again at teardown."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(source)
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop(name, None)
    module = importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module

