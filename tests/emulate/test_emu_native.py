"""The compiled part of the emulator (device guard, hooks, generators): cache, and the error without a compiler."""

from __future__ import annotations

import pytest

from torchport.emulate import _native


def test_no_compiler_gives_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHPORT_EXTENSIONS_DIR", str(tmp_path))  # nothing cached there
    monkeypatch.setattr(_native, "_loaded", [])
    monkeypatch.setattr(_native, "_compiler", lambda: None)
    with pytest.raises(_native.NativeBuildError, match=r"needs a C\+\+ compiler on first use .*apt-get install g\+\+"):
        _native.load()


def test_cached_module_loads_without_a_compiler(monkeypatch, emulated_npu):
    so = _native.build_dir() / "torchport_npu_native.so"
    assert so.is_file()  # built by the install the fixture did
    monkeypatch.setattr(_native, "_loaded", [])
    monkeypatch.setattr(_native, "_compiler", lambda: None)
    mod = _native.load()
    assert mod.capacity() >= 8 and hasattr(mod, "register_guard")


def test_build_dir_is_per_torch_version_and_source(monkeypatch, tmp_path):
    import torch

    monkeypatch.setenv("TORCHPORT_EXTENSIONS_DIR", str(tmp_path))
    d = _native.build_dir()
    assert d.parent == tmp_path and torch.__version__.replace("+", "_") in d.name


@pytest.mark.parametrize("argv", [["-m", "torchport.cli.main", "train", "--epochs", "1"],
                                  ["-m", "torchport.cli.main", "doctor"],
                                  ["-c", "import torch"]])
def test_without_a_compiler_the_cli_says_one_line_and_exits_2(tmp_path, argv):
    """No compiler on PATH, nothing cached: one line naming what to install, exit 2 (USAGE), no
    traceback and no crash (it once printed ~111 lines of tracebacks and ended in a segfault)."""
    import os
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"  # PATH: nothing in it, so no c++ / g++ / clang++
    bin_dir.mkdir()
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": str(bin_dir), "TORCHPORT_EMULATE": "npu",
           "TORCHPORT_EXTENSIONS_DIR": str(tmp_path / "ext"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "C++ compiler" in lines[0] and "apt-get install g++" in lines[0] and "TORCHPORT_EMULATE" in lines[0]
