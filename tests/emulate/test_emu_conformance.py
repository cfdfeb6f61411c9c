"""Conformance with the real torch_npu: names and signatures, read from the wheel without importing it.

The wheel comes from tools/fetch_torch_npu_wheel.sh (``.ci/run`` calls it once, caching in
``$TORCHPORT_TORCH_NPU_WHEEL_DIR``, default ``~/.cache/torchport/wheels``); point
``TORCHPORT_TORCH_NPU_WHEEL`` at a wheel file or a directory holding one to use another.
Without a wheel the tests FAIL, saying how to get one; a developer may opt out explicitly with
``TORCHPORT_SKIP_CONFORMANCE=1`` (CI never does).
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = Path(os.environ.get("TORCHPORT_TORCH_NPU_WHEEL_DIR") or Path.home() / ".cache/torchport/wheels")


def _find_wheel() -> Path | None:
    env = os.environ.get("TORCHPORT_TORCH_NPU_WHEEL")
    candidates = [Path(env)] if env else [DEFAULT_CACHE, ROOT / ".cache" / "torch-npu"]
    for c in candidates:
        if c.is_file():
            return c
        if c.is_dir():
            wheels = sorted(c.glob("torch_npu-*.whl"))
            if wheels:
                return wheels[-1]
    return None


WHEEL = _find_wheel()
#: A developer without the wheel may opt out explicitly; CI (.ci/run) never does, and downloads the wheel.
OPT_OUT = os.environ.get("TORCHPORT_SKIP_CONFORMANCE") == "1"
pytestmark = pytest.mark.skipif(OPT_OUT, reason="TORCHPORT_SKIP_CONFORMANCE=1: conformance with the real "
                                "torch-npu wheel opted out (local only; .ci/run never sets it)")


@pytest.fixture(autouse=True)
def _wheel_required():
    if WHEEL is None:
        pytest.fail(f"torch-npu wheel not available: run tools/fetch_torch_npu_wheel.sh (fills {DEFAULT_CACHE}) or "
                    "set TORCHPORT_TORCH_NPU_WHEEL; to skip these tests locally set TORCHPORT_SKIP_CONFORMANCE=1")


class RealTorchNpu:
    """Top-level functions/classes of torch_npu/npu/*.py, parsed (not imported) from the wheel."""

    def __init__(self, wheel: Path) -> None:
        self.zip = zipfile.ZipFile(wheel)
        self.sources: dict[str, str] = {}
        for name in self.zip.namelist():
            if name.startswith("torch_npu/npu/") and name.endswith(".py") and name.count("/") <= 3:
                self.sources[name] = self.zip.read(name).decode("utf-8", "replace")
        init = ast.parse(self.sources["torch_npu/npu/__init__.py"])
        self.all = set(self._literal_all(init))
        self.defs: dict[str, ast.AST] = {}
        # __init__.py wins over the submodules it re-exports from
        ordered = sorted(self.sources, key=lambda n: (n != "torch_npu/npu/__init__.py", n))
        for name in ordered:
            for node in ast.parse(self.sources[name]).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in self.defs:
                    self.defs[node.name] = node

    @staticmethod
    def _literal_all(tree: ast.Module) -> list[str]:
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                return list(ast.literal_eval(node.value))
        return []

    def params(self, name: str, method: str | None = None) -> list[str]:
        node = self.defs[name]
        if isinstance(node, ast.ClassDef):
            fns = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
            node = fns.get(method) if method else (fns.get("__init__") or fns.get("__new__"))
            assert node is not None, f"torch_npu.npu.{name} has no {method or '__init__/__new__'}"
        args = node.args
        names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        return [n for n in names if n not in ("self", "cls")]


@pytest.fixture(scope="module")
def real() -> RealTorchNpu:
    return RealTorchNpu(WHEEL)


def _ours(name: str):
    from torchport.emulate import _npu_module

    return getattr(_npu_module, name)


def _our_params(obj, method: str | None = None) -> list[str]:
    if inspect.isclass(obj):
        obj = getattr(obj, method or "__init__")
    return [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]


def test_every_emulated_name_exists_in_torch_npu(real):
    from torchport.emulate import _npu_module

    missing = [n for n in _npu_module.__all__ if n != "amp" and n not in real.all]
    assert not missing, f"emulated torch.npu names absent from torch_npu.npu.__all__: {missing}"
    assert "torch_npu/npu/amp/__init__.py" in real.sources


@pytest.mark.parametrize("name", [
    "is_available", "device_count", "current_device", "set_device", "synchronize", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "empty_cache", "mem_get_info", "get_device_name",
    "get_device_properties", "is_bf16_supported", "memory_stats", "current_stream", "default_stream",
    "set_compile_mode", "is_jit_compile_false", "set_option", "get_device_capability", "utilization",
])
def test_function_signatures_match(real, name):
    assert name in real.defs, f"torch_npu.npu.{name} not found in the wheel"
    theirs = real.params(name)
    ours = _our_params(_ours(name))
    assert ours[: len(theirs)] == theirs, f"torch.npu.{name}: emulator {ours} vs torch_npu {theirs}"


@pytest.mark.parametrize("name, method", [
    ("device", "__init__"), ("device_of", "__init__"), ("StreamContext", "__init__"),
    ("Stream", None), ("Event", None),
])
def test_class_signatures_match(real, name, method):
    theirs = real.params(name, method)
    ours = _our_params(_ours(name), "__init__")
    assert [p for p in ours if p != "kwargs"] == [p for p in theirs if p != "kwargs"], (
        f"torch.npu.{name}: emulator {ours} vs torch_npu {theirs}"
    )


def test_amp_surface_matches(real):
    from torchport.emulate import _npu_amp

    amp_init = ast.parse(real.sources["torch_npu/npu/amp/__init__.py"])
    assert set(_npu_amp.__all__) <= set(RealTorchNpu._literal_all(amp_init))
    scaler_src = real.sources["torch_npu/npu/amp/grad_scaler.py"]
    scaler = next(n for n in ast.parse(scaler_src).body if isinstance(n, ast.ClassDef) and n.name == "GradScaler")
    init = next(n for n in scaler.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    theirs = [a.arg for a in init.args.args if a.arg != "self"]
    assert _our_params(_npu_amp.GradScaler) == theirs
    assert re.search(r"state\[[\"']dynamic[\"']\]", scaler_src), "torch_npu's scaler state_dict carries 'dynamic'"
    autocast = next(n for n in ast.parse(real.sources["torch_npu/npu/amp/autocast_mode.py"]).body
                    if isinstance(n, ast.ClassDef) and n.name == "autocast")
    init = next(n for n in autocast.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert _our_params(_npu_amp.autocast) == [a.arg for a in init.args.args if a.arg != "self"]


def _device_module_calls() -> set[str]:
    """Names torchport calls on a device module (``target.module.X`` / npu backend's ``mod.X``)."""
    names: set[str] = set()
    npu_backend = (ROOT / "src/torchport/backends/npu.py").read_text()
    names |= set(re.findall(r"\b(?:mod|m)\.(\w+)\(", npu_backend))
    for path in (ROOT / "src/torchport").rglob("*.py"):
        if "emulate" in path.parts or "migrate" in path.parts:   # migrate's ``.module`` is a LibCST Module
            continue
        names |= set(re.findall(r"\.module(?:\(\))?\.(\w+)\(", path.read_text(errors="replace")))
    # ``row.module.rpartition(".")``: a ``.module`` that is a dotted-name string, not a device module
    return {n for n in names if not n.startswith("_") and not hasattr(str, n)}


def test_names_torchport_calls_exist_in_torch_npu(real):
    called = _device_module_calls()
    assert {"is_available", "device_count"} <= called
    missing = sorted(n for n in called if n not in real.all and n not in real.defs and n != "amp")
    assert not missing, f"torchport calls torch.npu names that torch_npu does not have: {missing}"
    from torchport.emulate import _npu_module

    not_emulated = sorted(n for n in called if not hasattr(_npu_module, n))
    assert not not_emulated, f"torchport calls torch.npu names the emulator lacks: {not_emulated}"


def test_fallback_warning_text_matches_torch_npu():
    """The CAUTION message the emulator emits is torch_npu's own wording."""
    with zipfile.ZipFile(WHEEL) as z:
        lib = next((n for n in z.namelist() if n.endswith("lib/libtorch_npu.so")), None)
        assert lib is not None, f"{WHEEL.name} has no lib/libtorch_npu.so"
        data = z.read(lib)
    assert b"is not currently supported on the NPU backend and will fall back to run on the CPU." in data
    assert b"CAUTION: The operator '" in data


#: the Python surfaces of torch_npu beside its ops: module -> the wheel file whose names it exports
PYTHON_SURFACES = {"torch_npu.contrib": "torch_npu/contrib/__init__.py",
                   "torch_npu.contrib.function": "torch_npu/contrib/function/__init__.py",
                   "torch_npu.contrib.module": "torch_npu/contrib/module/__init__.py",
                   "torch_npu.utils": "torch_npu/utils/__init__.py",
                   "torch_npu.testing.decorator": "torch_npu/testing/decorator.py"}


def wheel_python_names(wheel: Path) -> list[str]:
    """``"module name"`` lines: each surface's ``__all__`` plus the public names its ``__init__`` imports from its
    own submodules (what ``from torch_npu.contrib.module import X`` finds), or a plain file's public defs."""
    lines = []
    with zipfile.ZipFile(wheel) as z:
        for module, path in PYTHON_SURFACES.items():
            tree = ast.parse(z.read(path).decode("utf-8", "replace"))
            names = set(RealTorchNpu._literal_all(tree))
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and node.level == 1:
                    names |= {a.asname or a.name for a in node.names}
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and path.endswith("decorator.py"):
                    names.add(node.name)
            lines += [f"{module} {n}" for n in sorted(names) if not n.startswith("_")]
    return lines


def test_python_surface_list_is_the_wheels():
    """data/torch_npu_2_14_0_python_names.txt (what the stand-in is checked against) is the wheel's own list."""
    text = (ROOT / "src/torchport/emulate/data/torch_npu_2_14_0_python_names.txt").read_text()
    ours = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert sorted(ours) == sorted(wheel_python_names(WHEEL))
