"""The ``torch_npu`` stand-in: an import hook serving a real package while the emulator is on.

``import torch_npu`` (also before ``import torch``), ``importlib.util.find_spec("torch_npu")``,
``from torch_npu.contrib import transfer_to_npu``, ``import torch_npu.profiler`` ... resolve to
the files under ``_torch_npu/`` (loaded under the ``torch_npu`` name, with a spec and
``__path__``), and ``torch_npu.npu`` is ``torch.npu`` itself (so are its submodules
``utils``, ``memory``, ``random``, ``streams``, ``amp``: ``torch.npu.utils`` is
``torch_npu.npu.utils``; ``torch_npu.npu.amp`` is the package ``torch.npu.amp``, whose
submodules ``autocast_mode``/``grad_scaler`` live in ``_torch_npu/npu/amp/``).
``from apex import amp`` resolves to ``_apex/`` (see its ``amp.py``) when no real apex is installed, and
``import torchair`` to ``_torchair/`` (``get_npu_backend``: AOT autograd on the emulated npu) when no real one is.

The hook is on ``sys.meta_path`` only while the emulator is installed, plus -- when
``TORCHPORT_EMULATE`` is set -- from interpreter start (``torchport-emulate.pth`` calls
:func:`boot`), so a script may import ``torch_npu`` first: the stand-in imports torch, whose
autoload entry point installs the emulator.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["install_finder", "uninstall_finder", "boot", "PACKAGE_DIR"]

PACKAGE_DIR = Path(__file__).parent / "_torch_npu"
APEX_DIR = Path(__file__).parent / "_apex"
TORCHAIR_DIR = Path(__file__).parent / "_torchair"
_NPU_SUBMODULES = ("utils", "memory", "random", "streams", "mstx", "amp")


class _ModuleLoader(importlib.abc.Loader):
    """Loader returning an existing module object (``torch_npu.npu`` is ``torch.npu``)."""

    def __init__(self, get: Any) -> None:
        self._get = get

    def create_module(self, spec: Any) -> Any:
        return self._get()

    def exec_module(self, module: Any) -> None:
        pass


def _amp_spec(fullname: str) -> Any:
    """``torch_npu.npu.amp`` / ``torch.npu.amp``: the emulator's amp module, as a package."""
    from torchport.emulate import _npu_amp

    spec = importlib.util.spec_from_loader(fullname, _ModuleLoader(lambda: _npu_amp), is_package=True)
    spec.submodule_search_locations = [str(PACKAGE_DIR / "npu" / "amp")]
    return spec


def _apex_spec(fullname: str) -> Any:
    """``apex`` / ``apex.amp``: the stand-in under ``_apex/``, unless a real apex is installed."""
    if importlib.machinery.PathFinder.find_spec("apex") is not None:
        return None
    base = APEX_DIR.joinpath(*fullname.split(".")[1:])
    if (base / "__init__.py").is_file():
        return importlib.util.spec_from_file_location(fullname, base / "__init__.py",
                                                      submodule_search_locations=[str(base)])
    if base.with_suffix(".py").is_file():
        return importlib.util.spec_from_file_location(fullname, base.with_suffix(".py"))
    return None


def _torchair_spec(fullname: str) -> Any:
    """``torchair``: the stand-in under ``_torchair/``, unless a real torchair is installed."""
    if importlib.machinery.PathFinder.find_spec("torchair") is not None:
        return None
    return importlib.util.spec_from_file_location(fullname, TORCHAIR_DIR / "__init__.py",
                                                  submodule_search_locations=[str(TORCHAIR_DIR)])


class StandinFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch_npu`` / ``torch_npu.*`` (and ``torch.npu.<submodule>``) in the stand-in package."""

    __torchport_emulated__ = True

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "apex" or fullname.startswith("apex."):
            return _apex_spec(fullname)
        if fullname == "torchair":
            return _torchair_spec(fullname)
        if fullname in ("torch_npu.npu.amp", "torch.npu.amp"):
            return _amp_spec(fullname)
        if fullname.startswith("torch.npu."):
            sub = fullname[len("torch.npu."):]
            if "." in sub or not (PACKAGE_DIR / "npu" / f"{sub}.py").is_file():
                return None
            return importlib.util.spec_from_loader(
                fullname, _ModuleLoader(lambda: importlib.import_module(f"torch_npu.npu.{sub}")))
        if fullname != "torch_npu" and not fullname.startswith("torch_npu."):
            return None
        if fullname == "torch_npu.npu":
            import torch

            spec = importlib.util.spec_from_loader(fullname, _ModuleLoader(lambda: torch.npu), is_package=True)
            spec.submodule_search_locations = [str(PACKAGE_DIR / "npu")]
            return spec
        base = PACKAGE_DIR.joinpath(*fullname.split(".")[1:])
        init = base / "__init__.py"
        if init.is_file():
            return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(base)])
        if base.with_suffix(".py").is_file():
            return importlib.util.spec_from_file_location(fullname, base.with_suffix(".py"))
        return None


_FINDER = StandinFinder()


def install_finder() -> None:
    """Put the stand-in first on ``sys.meta_path`` (the emulator is on: it answers for torch_npu)."""
    for f in list(sys.meta_path):
        if getattr(f, "__torchport_emulated__", False):
            sys.meta_path.remove(f)
    sys.meta_path.insert(0, _FINDER)
    npu = sys.modules.get("torch.npu")
    if npu is not None:
        npu.__path__ = [str(PACKAGE_DIR / "npu")]


def uninstall_finder() -> None:
    """Remove the hook and every loaded stand-in module."""
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    ops = sys.modules.get("torch_npu._ops")
    if ops is not None and getattr(ops, "uninstall", None) is not None:
        ops.uninstall()  # the torch.npu_* names the stand-in set
    for key in [k for k in sys.modules if k == "torch_npu" or k.startswith("torch_npu.")]:
        mod = sys.modules[key]
        if getattr(mod, "__torchport_emulated__", False) or str(getattr(mod, "__file__", "") or "").startswith(
                str(PACKAGE_DIR)) or getattr(mod, "__spec__", None) is not None and isinstance(
                getattr(mod.__spec__, "loader", None), _ModuleLoader):
            del sys.modules[key]
    for key in [k for k in sys.modules if k == "apex" or k.startswith("apex.") or k == "torchair"]:
        if str(getattr(sys.modules[key], "__file__", "") or "").startswith((str(APEX_DIR), str(TORCHAIR_DIR))):
            del sys.modules[key]
    for sub in _NPU_SUBMODULES:
        sys.modules.pop(f"torch.npu.{sub}", None)


class _BootFinder(importlib.abc.MetaPathFinder):
    """Before torch is imported: ``torch_npu`` (and ``apex``, Ascend's fork imports torch itself) means
    "import torch (installs the emulator), then the stand-in".

    Placed last on ``sys.meta_path``, so a real torch_npu on ``sys.path`` always wins.
    """

    __torchport_emulated__ = True

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in ("torch_npu", "apex"):
            return None
        if fullname == "apex" and importlib.machinery.PathFinder.find_spec("apex") is not None:
            return None  # a real apex
        if "torch" not in sys.modules:
            import torch  # noqa: F401  (autoload installs the emulator and the stand-in finder)
        if _FINDER in sys.meta_path:
            return _FINDER.find_spec(fullname, path, target)
        return None


def boot() -> None:
    """Interpreter start (``torchport-emulate.pth``): when ``TORCHPORT_EMULATE`` is set, make
    ``import torch_npu`` work before ``import torch``. Does nothing otherwise."""
    if not os.environ.get("TORCHPORT_EMULATE"):
        return
    if not any(isinstance(f, _BootFinder) for f in sys.meta_path):
        sys.meta_path.append(_BootFinder())
