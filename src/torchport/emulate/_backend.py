"""Install / uninstall the emulated NPU into torch (the process-wide plumbing).

What install touches, and how uninstall undoes it:

====================================  ===============================================
install                               uninstall
====================================  ===============================================
rename PrivateUse1 to ``npu``         permanent in torch (once per process); harmless
device guard + hooks (first time)     permanent; the hook reports "not available"
``torch.npu`` = emulated module       ``torch.npu`` = a dormant stub: is_available()
                                      False (torch.accelerator needs *a* module)
``Tensor.npu`` / ``is_npu`` ...       deleted (re-generated on the next install)
``torch_npu`` stand-in import hook     removed, with its loaded modules
Python kernels (AMP, SyncBN, RNN)     libraries destroyed
npu kernels + CPU fallback (C++)      stay, refusing to run (npu tensors become unusable)
pinned host allocator (C++ hooks)     stays (host memory either way)
multiprocessing reducer for npu       torch's reducers put back
``torch.nn.parallel.comm`` (for DP)   torch's functions put back
``torch.accelerator`` memory/device   torch's functions put back
functions routed to ``torch.npu``
``torch.compile``'s Inductor backend  torch's method put back
compiles npu graphs on their CPU view
====================================  ===============================================
"""

from __future__ import annotations

import sys
import types
from typing import Any

import torch
from torch.library import Library

from torchport.errors import ExitCode, TorchportError
from torchport.emulate import _accelerator, _autocast, _card_rules, _compile, _handlers, _npu_module, _numerics, _parallel, _serialization, _standin, _syncbn, _threads
from torchport.emulate import _tensor as T
from torchport.emulate._state import STATE

__all__ = ["install_backend", "uninstall_backend", "prepare", "check_autograd", "EmulationError", "DEFAULT_SEED"]

#: torch_npu's (and CUDA's) default generator seed
DEFAULT_SEED = 67280421310721
_NAME = "npu"
_once: dict[str, Any] = {}
_libs: list[Library] = []
_added_methods: list[tuple[Any, str]] = []


class EmulationError(TorchportError, RuntimeError):
    """The emulator cannot be installed here (the message says why and what to do); exit code 2."""

    exit_code = ExitCode.USAGE


def _dormant_module() -> types.ModuleType:
    mod = types.ModuleType("torch.npu", "Emulated NPU (torchport), currently uninstalled.")
    mod.__torchport_emulated__ = True
    mod.is_available = lambda: False
    mod.device_count = lambda: 0
    mod.is_initialized = lambda: False
    mod._is_in_bad_fork = lambda: False
    mod.manual_seed_all = lambda seed: None
    mod.current_device = lambda: 0
    return mod


def _check_can_install() -> None:
    mod = sys.modules.get("torch_npu")
    if mod is not None and not getattr(mod, "__torchport_emulated__", False):
        raise EmulationError(
            "a real torch_npu is loaded in this process: the emulated NPU refuses to shadow real Ascend "
            "hardware support. Unset TORCHPORT_EMULATE (or do not call torchport.emulate.install())."
        )
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", _NAME) or (name == _NAME and "renamed" not in _once):
        raise EmulationError(
            f"torch's PrivateUse1 device is already claimed by {name!r} (another out-of-tree backend); "
            "the emulated NPU needs it. Run the emulator in a separate process."
        )


def _generate_methods() -> None:
    owners = [torch.Tensor, torch.nn.Module, torch.storage._StorageBase, torch.UntypedStorage,
              torch.storage.TypedStorage, torch.nn.utils.rnn.PackedSequence]
    before = {id(o): set(vars(o)) for o in owners}
    if not hasattr(torch.Tensor, f"is_{_NAME}"):  # storages too: TypedStorage.npu(), as torch_npu has
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    _added_methods[:] = [(o, a) for o in owners for a in set(vars(o)) - before[id(o)]]


#: devices the autograd engine gets queues for when the guard is registered (it sizes them once)
MIN_CAPACITY = 8


def prepare(devices: int = 1) -> None:
    """Register the ``npu`` device guard (compiled, see ``_native.py``) before any ``backward()`` runs.

    torch's autograd engine sizes its device queues once, at the first ``backward()``,
    from the guard's device count; a backend whose guard appears later can never run
    backward. The guard alone is invisible (no rename, ``torch.accelerator`` unchanged),
    so the pytest plugin calls this at start-up.

    Raises:
        EmulationError: the native module cannot be built (no C++ compiler).
    """
    from torchport.emulate import _native

    if STATE.native is None:
        try:
            STATE.native = _native.load()
        except _native.NativeBuildError as exc:
            raise EmulationError(str(exc)) from None
    STATE.native.register_guard(max(MIN_CAPACITY, int(devices)))
    _once["guard"] = True


def set_generators(devices: int) -> None:
    """``STATE`` gets the default generators of ``npu:0..devices-1`` and the host generators drawing for them."""
    gens = [STATE.native.default_generator(i) for i in range(devices)]
    STATE.default_generators = gens
    STATE.generators = [STATE.native.host_generator(g) for g in gens]


def check_autograd() -> None:
    """Raise :class:`EmulationError` when backward cannot run on the emulated device here."""
    x = torch.ones(1, device=_NAME).requires_grad_()
    try:
        (x * 2).sum().backward()
    except RuntimeError as exc:
        if "device_ready_queues_" not in str(exc):
            raise
        raise EmulationError(
            "backward() already ran in this process before the emulated NPU was installed, and torch's "
            "autograd engine sized its device queues then (without npu). Install the emulator first: set "
            "TORCHPORT_EMULATE=npu (installs at `import torch`), call torchport.emulate.prepare() at start-up, "
            "or use the pytest plugin (it prepares automatically)."
        ) from None


def install_backend(devices: int) -> None:
    """Make ``npu`` a working torch device with ``devices`` emulated cards."""
    _check_can_install()
    if "renamed" not in _once:
        torch.utils.rename_privateuse1_backend(_NAME)
        _once["renamed"] = True
    _generate_methods()
    prepare(devices)
    native = STATE.native
    native.register_hooks()
    native.set_available(True, devices)
    native.set_hooks(T.classify, T.on_fallback, T.post)
    native.set_pre_hook(_numerics.pre)
    native.register_kernels()
    STATE.devices = devices
    STATE.current = 0
    set_generators(devices)
    STATE.perturb_generator = torch.Generator().manual_seed(0)
    STATE.overflow_flag = False
    STATE.installed = True
    py_kernels = {**_handlers.HANDLERS, **_syncbn.HANDLERS, **_card_rules.HANDLERS()}
    native.register_host_kernels(_card_rules.host_kernel_ops(
        frozenset(op.name() for op in (*py_kernels, *_card_rules.python_kernel_ops()))))
    _libs[:] = [_handlers.register(py_kernels), *_autocast.register()]

    if hasattr(torch, _NAME) and not getattr(getattr(torch, _NAME), "__torchport_emulated__", False):
        raise EmulationError(f"torch.{_NAME} already exists and is not the emulator's; refusing to replace it")
    _npu_module.__torchport_emulated__ = True
    setattr(torch, _NAME, _npu_module)
    sys.modules[f"torch.{_NAME}"] = _npu_module
    sys.modules[f"torch.{_NAME}.amp"] = _npu_module.amp
    _standin.install_finder()
    import torch.distributed as dist

    if not hasattr(dist, "is_hccl_available"):
        dist.is_hccl_available = _is_hccl_available
    _serialization.install()
    _parallel.install()
    _accelerator.install()
    _threads.install()
    _compile.install()
    T.reset_op_cache()
    _npu_module._reset_runtime()


def uninstall_backend() -> None:
    """Undo :func:`install_backend` (see the module docstring for what stays)."""
    STATE.installed = False
    STATE.native.set_available(False, 0)
    STATE.native.set_hooks(None, None, None)
    STATE.native.set_pre_hook(None)
    for lib in _libs:
        lib._destroy()
    _libs.clear()
    for owner, attr in _added_methods:
        if attr in vars(owner):
            delattr(owner, attr)
    _added_methods.clear()
    setattr(torch, _NAME, _dormant_module())
    sys.modules[f"torch.{_NAME}"] = getattr(torch, _NAME)
    sys.modules.pop(f"torch.{_NAME}.amp", None)
    _standin.uninstall_finder()
    import torch.distributed as dist

    if getattr(dist, "is_hccl_available", None) is _is_hccl_available:
        del dist.is_hccl_available
    _serialization.uninstall()
    _parallel.uninstall()
    _accelerator.uninstall()
    _threads.uninstall()
    _compile.uninstall()
    STATE.devices = 0
    STATE.generators = []
    STATE.default_generators = []


def _is_hccl_available() -> bool:
    """``torch.distributed.is_hccl_available()`` (torch_npu adds it): True while the emulator is on."""
    return STATE.installed
