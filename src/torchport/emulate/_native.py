"""The compiled half of the emulated NPU: a PrivateUse1 device guard and device generators in C++.

torch's Python route for out-of-tree backends (``torch._C._acc``) hard-wires the device
guard to index 0 and one device, and cannot register generators. So every emulated
tensor would look like ``npu:0`` to C++ (autograd queues, DDP's reducer, foreach
grouping in ``clip_grad_norm_``), and ``torch.Generator(device="npu")`` would not exist.
``_csrc/npu_native.cpp`` registers the two missing pieces the way PyTorch's OpenReg
reference backend does. It is built once per torch version with torch's C++ extension
tooling (about a minute) and cached under ``~/.cache/torchport/torch_extensions``
(``TORCHPORT_EXTENSIONS_DIR`` overrides).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["load", "build_dir", "NativeBuildError"]

_SRC = Path(__file__).parent / "_csrc" / "npu_native.cpp"
_loaded: list[Any] = []
log = logging.getLogger("torchport.emulate")


class NativeBuildError(RuntimeError):
    """The emulator's C++ part cannot be built here (no compiler, or the build failed)."""


def _cache_root() -> Path:
    return Path(os.environ.get("TORCHPORT_EXTENSIONS_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "torchport", "torch_extensions"))


def _tag(torch_version: str) -> str:
    digest = hashlib.sha256(_SRC.read_bytes()).hexdigest()[:12]
    return f"py{sys.version_info[0]}{sys.version_info[1]}-torch{torch_version.replace('+', '_')}-{digest}"


def build_dir() -> Path:
    """Where the compiled module is cached (one folder per torch version and source hash)."""
    import torch

    return _cache_root() / _tag(torch.__version__)


def _compiler() -> str | None:
    cxx = os.environ.get("CXX", "c++")
    return shutil.which(cxx) or shutil.which("g++") or shutil.which("clang++")


_NO_COMPILER = (
    "the emulated NPU needs a C++ compiler on first use (it builds its device against this torch, about a minute); "
    "none found (looked for $CXX, c++, g++, clang++). Install one, e.g. `apt-get install g++`, "
    "or `conda install gxx`.")


def preflight() -> None:
    """Raise :class:`NativeBuildError` when :func:`load` is sure to fail for want of a compiler -- checked
    without importing torch, so a command can say so in one line before torch's backend autoload turns it
    into a traceback inside ``import torch``. A cached module for this source (any torch version) passes;
    :func:`load` still decides whether it fits this torch."""
    if _compiler() is not None:
        return
    if not any(_cache_root().glob(f"{_tag('*')}/torchport_npu_native.so")):
        raise NativeBuildError(_NO_COMPILER)


def load() -> Any:
    """Build (first use) or load the native module; raise :class:`NativeBuildError` when impossible."""
    if _loaded:
        return _loaded[0]
    out = build_dir()
    so = out / "torchport_npu_native.so"
    if so.is_file():  # cached: import it directly (no compiler or ninja needed)
        try:
            mod = _import_so(so)
        except ImportError:
            pass
        else:
            _loaded.append(mod)
            return mod
    if _compiler() is None:
        raise NativeBuildError(_NO_COMPILER)
    log.warning("torchport: building the emulated NPU's native module (first use, about a minute) in %s", out)
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime" notice
    import torch.utils.cpp_extension as ext

    try:
        mod = ext.load(name="torchport_npu_native", sources=[str(_SRC)], build_directory=str(out),
                       extra_cflags=["-O1"], verbose=False)
    except Exception as exc:  # compiler errors, missing headers, ninja absent
        raise NativeBuildError(
            f"building the emulated NPU's native module failed ({type(exc).__name__}: {str(exc).strip()[-400:]}); "
            f"build folder {out}. Check that g++ and ninja work (`pip install ninja`).") from exc
    _loaded.append(mod)
    log.info("torchport: emulated NPU native module built in %s", out)
    return mod


def _import_so(path: Path) -> Any:
    import importlib.machinery
    import importlib.util

    import torch  # noqa: F401  (the module links against torch's libraries)

    loader = importlib.machinery.ExtensionFileLoader("torchport_npu_native", str(path))
    spec = importlib.util.spec_from_file_location("torchport_npu_native", str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
