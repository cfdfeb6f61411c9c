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


def _without_a_compiler(tmp_path, argv):
    import os
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"  # PATH: nothing in it, so no c++ / g++ / clang++
    bin_dir.mkdir()
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": str(bin_dir), "TORCHPORT_EMULATE": "npu",
           "TORCHPORT_EXTENSIONS_DIR": str(tmp_path / "ext"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("argv", [["-m", "torchport.cli.main", "train", "--epochs", "1"],
                                  ["-m", "torchport.cli.main", "doctor"]])
def test_without_a_compiler_the_cli_says_one_line_and_exits_2(tmp_path, argv):
    """No compiler on PATH, nothing cached: one line naming what to install, exit 2 (USAGE), no
    traceback and no crash (it once printed ~111 lines of tracebacks and ended in a segfault)."""
    proc = _without_a_compiler(tmp_path, argv)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "C++ compiler" in lines[0] and "apt-get install g++" in lines[0] and "TORCHPORT_EMULATE" in lines[0]


def test_without_a_compiler_import_torch_raises_the_one_line_cause_and_the_process_goes_on(tmp_path):
    """Library code raises (emulate/autoload.py): `import torch` fails with torchport's one-line error as
    the cause, naming the variable and what to install, and the interpreter keeps running."""
    code = ("try:\n    import torch\nexcept RuntimeError as exc:\n    print('cause:', type(exc.__cause__).__name__,"
            " exc.__cause__)\nprint('alive')\n")
    proc = _without_a_compiler(tmp_path, ["-c", code])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cause: EmulateError TORCHPORT_EMULATE=npu:" in proc.stdout and "apt-get install g++" in proc.stdout
    assert "alive" in proc.stdout


def test_preflight_passes_with_a_compiler_or_a_cached_module(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHPORT_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_compiler", lambda: None)
    with pytest.raises(_native.NativeBuildError, match="C\\+\\+ compiler"):
        _native.preflight()
    so = _native.build_dir() / "torchport_npu_native.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    _native.preflight()  # a cached module for this source: no compiler needed
    monkeypatch.setattr(_native, "_compiler", lambda: "/usr/bin/c++")
    so.unlink()
    _native.preflight()
