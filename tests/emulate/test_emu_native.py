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
