"""torchport.emulate: an emulated Ascend NPU -- an ``npu`` device whose tensors live in host memory.

Run the NPU code path (``x.to("npu")``, ``model.npu()``, ``torch.npu.*``, AMP on
``"npu"``, ``torch.save`` of npu tensors, DDP over ``hccl``) on any machine, only slower.

Example::

    import torch, torchport.emulate
    with torchport.emulate.emulated(devices=2):
        model = torch.nn.Linear(4, 2).to("npu")
        with torch.autocast("npu"):
            y = model(torch.randn(3, 4, device="npu"))      # float16, like on a 910B
        print(torch.npu.max_memory_allocated())

or, for any Python process that imports torch (no torchport import needed)::

    TORCHPORT_EMULATE=npu:2 torchrun --nproc-per-node 2 train.py

``import torchport.emulate`` imports nothing heavy and patches nothing; see
``docs/emulator.md`` for what is emulated and the known differences from hardware.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterable, Iterator, Mapping

from torchport.emulate._numerics import cuda_numerics, numerics, round_mantissa, set_numerics, ulp_distance
from torchport.emulate._state import INF, SATURATE, STATE

__all__ = [
    "install",
    "uninstall",
    "emulated",
    "is_installed",
    "install_from_env",
    "prepare",
    "parse_env",
    "set_fallback_ops",
    "clear_fallback_ops",
    "set_coverage",
    "fallback_stats",
    "set_overflow_mode",
    "set_perturbation",
    "clear_perturbation",
    "memory_stats",
    "set_numerics",
    "numerics",
    "cuda_numerics",
    "round_mantissa",
    "ulp_distance",
    "EmulationError",
    "ENV_VAR",
]

#: environment variable read by :func:`install_from_env` and the torch autoload hook
ENV_VAR = "TORCHPORT_EMULATE"
_previous_spec: list = []
_module_hook: list = []


def __getattr__(name: str) -> Any:
    if name == "EmulationError":
        from torchport.emulate._backend import EmulationError

        return EmulationError
    raise AttributeError(f"module 'torchport.emulate' has no attribute {name!r}")


def prepare() -> None:
    """Get this process ready for a later :func:`install` (call it before the first ``backward()``).

    Only needed when the emulator is installed *after* autograd already ran in the process
    (e.g. a test session); ``TORCHPORT_EMULATE`` and the pytest plugin do it for you.
    """
    import torch  # noqa: F401  (first: its backend autoload may install the emulator itself)

    from torchport.emulate._backend import prepare as _prepare

    _prepare()


def is_installed() -> bool:
    """True while the emulated NPU is installed in this process."""
    return STATE.installed


def normalize_op_name(op: Any) -> str:
    """``"aten.convolution"``, ``"aten::convolution.default"``, ``"convolution"`` or an op -> ``"aten::convolution"``."""
    name = getattr(op, "_schema", None)
    if name is not None:
        return op._schema.name
    name = getattr(op, "_qualified_op_name", None) or str(op)
    name = name.replace("::", ".")
    parts = name.split(".")
    if parts[0] == "torch" and len(parts) > 2 and parts[1] == "ops":
        parts = parts[2:]
    if len(parts) == 1:
        parts = ["aten", parts[0]]
    return f"{parts[0]}::{parts[1]}"


def set_fallback_ops(ops: Iterable[Any]) -> None:
    """Treat ``ops`` as "not supported on the NPU": they run via CPU fallback with torch_npu's warning.

    Args:
        ops: operator names (``"aten::nonzero"``, ``"aten.nonzero"``, ``"nonzero"``) or op objects.

    Example::

        torchport.emulate.set_fallback_ops(["aten.nonzero"])
        torch.nonzero(torch.ones(3, device="npu"))   # UserWarning: CAUTION: The operator 'aten::nonzero' ...
    """
    STATE.fallback_ops = frozenset(normalize_op_name(o) for o in ops)
    STATE.fallback_warned.clear()
    STATE.fallback_counts.clear()
    _reset_op_cache()


def set_coverage(enabled: bool) -> None:
    """Warn (torch_npu's CPU-fallback text, once per op) for operators torch_npu 2.14.0 does not
    implement for the NPU (on by default; the list comes from the wheel's op-plugin metadata)."""
    STATE.coverage = bool(enabled)
    _reset_op_cache()


def _reset_op_cache() -> None:
    import sys

    tensor_mod = sys.modules.get("torchport.emulate._tensor")
    if tensor_mod is not None:
        tensor_mod.reset_op_cache()


def clear_fallback_ops() -> None:
    """No operator is treated as unsupported any more."""
    set_fallback_ops(())


def fallback_stats() -> dict[str, int]:
    """How many times each injected-unsupported operator ran through the CPU fallback."""
    return dict(STATE.fallback_counts)


def set_overflow_mode(mode: str) -> None:
    """``"inf"`` (IEEE, 910B default) or ``"saturate"`` (float16 overflow clamps to +-65504 and sets
    the overflow flag that ``torch.npu.get_npu_overflow_flag()`` and the GradScaler read)."""
    if mode not in (INF, SATURATE):
        raise ValueError(f"overflow_mode={mode!r}: expected {INF!r} or {SATURATE!r}")
    STATE.overflow_mode = mode
    STATE.overflow_flag = False
    _reset_op_cache()


def set_perturbation(perturb: Mapping[str, float] | None) -> None:
    """Add relative noise ``out * (1 + eps * U(-1, 1))`` to chosen ops' or modules' outputs.

    Args:
        perturb: ``{"aten.convolution": 1e-3}`` (an op, any overload) or ``{"Conv2d": 1e-3}`` /
            ``{"torch.nn.Conv2d": 1e-3}`` (every module of that class); None or ``{}`` clears.

    Mimics cross-hardware numeric differences for parity-check tests; the noise comes from a
    private generator, so it does not shift any user RNG stream.
    """
    ops: dict[str, float] = {}
    modules: dict[str, float] = {}
    for key, eps in dict(perturb or {}).items():
        k = str(key)
        if k.startswith(("aten.", "aten::", "torch.ops.")):
            ops[normalize_op_name(k)] = float(eps)
        else:
            modules[k.rsplit(".", 1)[-1]] = float(eps)
    STATE.perturb = ops
    _reset_op_cache()
    _set_module_perturbation(modules)


def clear_perturbation() -> None:
    """Remove every perturbation."""
    set_perturbation(None)


def _set_module_perturbation(modules: dict[str, float]) -> None:
    while _module_hook:
        _module_hook.pop().remove()
    if not modules:
        return
    import torch

    from torchport.emulate._tensor import perturb_tensor

    def hook(module: Any, args: Any, output: Any) -> Any:
        eps = modules.get(type(module).__name__)
        if eps and isinstance(output, torch.Tensor) and output.device.type == "npu" and output.is_floating_point():
            return perturb_tensor(output, eps)
        return None

    _module_hook.append(torch.nn.modules.module.register_module_forward_hook(hook))


def memory_stats(device: int | None = None) -> dict[str, int]:
    """``{"allocated": bytes, "peak": bytes}`` of npu storage alive on emulated device ``device``
    (the device allocator's own counters; ``torch.npu.memory_stats()`` has the full CUDA-like set)."""
    idx = STATE.current if device is None else int(device)
    stats = STATE.native.memory_stats(idx) if STATE.native is not None else {"current": 0, "peak": 0}
    return {"allocated": stats["current"], "peak": stats["peak"]}


def _facts() -> dict[str, Any]:
    return {
        "emulated": True,
        "devices": STATE.devices,
        "device_name": "Ascend910B3 (emulated)",
        "torch_npu": "torchport stand-in (no Ascend runtime)",
        "overflow_mode": STATE.overflow_mode,
        "fallback_ops": sorted(STATE.fallback_ops),
        "fallback_coverage": _coverage_source() if STATE.coverage else "off",
        "native_module": str(_native_dir()),
        "perturb": dict(STATE.perturb),
        "numerics": _numerics_facts(),
    }


def _numerics_facts() -> str:
    from torchport.emulate._numerics import NUMERICS

    if NUMERICS.mode == "exact":
        return "exact (host float32)"
    on = [f for f, v in (("conv", NUMERICS.conv_hf32), ("matmul", NUMERICS.matmul_hf32)) if v]
    return f"npu: HF32 ({NUMERICS.rounding}) for {', '.join(on) or 'nothing'}"


def _coverage_source() -> str:
    from torchport.emulate._coverage import SOURCE

    return SOURCE


def _native_dir() -> Any:
    from torchport.emulate._native import build_dir

    return build_dir()


def _register_spec() -> None:
    import dataclasses

    import torch

    from torchport import backends
    from torchport.backends import npu

    spec = dataclasses.replace(
        npu.SPEC,
        emulated=True,
        compile_backend="inductor",  # on the host view of npu graphs (emulate/_compile.py)
        probe=lambda: STATE.installed and STATE.devices > 0,
        device_count=lambda: STATE.devices if STATE.installed else 0,
        module=lambda: getattr(torch, "npu", None) if STATE.installed else None,
        doctor_facts=_facts,
        install_hint="The emulated NPU was uninstalled; call torchport.emulate.install() or set TORCHPORT_EMULATE=npu.",
    )
    previous = backends.register(spec, replace=True)
    if not _previous_spec:
        _previous_spec.append(previous)


def _configure(devices: int, fallback_ops: Iterable[Any], overflow_mode: str, perturb: Mapping | None) -> None:
    set_fallback_ops(fallback_ops)
    set_overflow_mode(overflow_mode)
    set_perturbation(perturb)
    if STATE.installed and devices != STATE.devices:
        _resize(devices)


def _resize(devices: int) -> None:
    from torchport.emulate._backend import prepare, set_generators

    prepare(devices)
    STATE.native.set_available(True, devices)
    set_generators(devices)
    STATE.devices = devices
    STATE.current = min(STATE.current, devices - 1)
    from torchport.emulate._npu_module import _resized

    _resized()


def install(
    devices: int = 1,
    *,
    fallback_ops: Iterable[Any] = (),
    overflow_mode: str = INF,
    perturb: Mapping[str, float] | None = None,
    verify_autograd: bool = True,
) -> None:
    """Install the emulated NPU in this process (or reconfigure it when already installed).

    Args:
        devices: number of emulated cards (``npu:0`` .. ``npu:devices-1``).
        fallback_ops: operators to treat as unsupported (see :func:`set_fallback_ops`).
        overflow_mode: ``"inf"`` or ``"saturate"`` (see :func:`set_overflow_mode`).
        perturb: numeric perturbation of chosen ops/modules (see :func:`set_perturbation`).
        verify_autograd: run a tiny backward on the device to fail early (with advice) when
            autograd already ran in this process; the autoload hook skips it (it runs inside
            ``import torch``, where nothing has run yet and a backward would deadlock).

    Raises:
        EmulationError: a real torch_npu is loaded, or another backend owns PrivateUse1.
        ValueError: ``devices`` < 1 or an unknown ``overflow_mode``.

    After install, ``torchport.select_device()`` picks ``npu (emulated)`` (npu has the top
    priority) and ``torch.npu`` / ``import torch_npu`` work.
    """
    devices = int(devices)
    if devices < 1:
        raise ValueError(f"devices={devices}: the emulated NPU needs at least one device")
    import torch  # noqa: F401  (first: with TORCHPORT_EMULATE set, importing torch installs the emulator)

    if not STATE.installed:
        from torchport.emulate import _distributed
        from torchport.emulate._backend import install_backend

        from torchport.emulate._backend import check_autograd, uninstall_backend

        install_backend(devices)
        try:
            if verify_autograd:
                check_autograd()
                from torchport.emulate._npu_module import _reset_runtime

                _reset_runtime()  # the probe is not the user's first use of the npu
        except Exception:
            uninstall_backend()
            raise
        _distributed.register()
        _register_spec()
        STATE.native.reload_alloc_conf()  # the program's first allocation reads PYTORCH_NPU_ALLOC_CONF
        import logging

        logging.getLogger("torchport.emulate").info(
            "torchport: emulated Ascend NPU installed (%d device(s), Ascend910B3, host memory)", devices)
    _configure(devices, fallback_ops, overflow_mode, perturb)


def uninstall() -> None:
    """Remove the emulated NPU: ``torch.npu`` reports unavailable, ``torch_npu`` disappears,
    the backend registry gets its previous npu record back. No-op when not installed.

    Tensors still on the emulated device become unusable (move them to cpu first).
    """
    if not STATE.installed:
        return
    from torchport import backends
    from torchport.emulate._backend import uninstall_backend
    from torchport.runtime import device as _device

    clear_perturbation()
    clear_fallback_ops()
    from torchport.emulate import _numerics

    _numerics.reset()
    STATE.overflow_mode = INF
    uninstall_backend()
    if _previous_spec:
        backends.unregister("npu", restore=_previous_spec.pop())
    _device.reset_selection()


@contextlib.contextmanager
def emulated(
    devices: int = 1,
    *,
    fallback_ops: Iterable[Any] = (),
    overflow_mode: str = INF,
    perturb: Mapping[str, float] | None = None,
) -> Iterator[Any]:
    """Context manager: the emulated NPU inside the block, the previous state after it.

    Yields the ``torch.npu`` module. Nested use (or use while ``TORCHPORT_EMULATE``
    installed it) reconfigures temporarily and restores the outer configuration.

    Example::

        with torchport.emulate.emulated(devices=2) as npu:
            assert npu.device_count() == 2
    """
    was = STATE.installed
    saved = (STATE.devices, STATE.fallback_ops, STATE.overflow_mode, dict(STATE.perturb)) if was else None
    install(devices, fallback_ops=fallback_ops, overflow_mode=overflow_mode, perturb=perturb)
    import torch

    try:
        yield torch.npu
    finally:
        if was:
            _configure(saved[0], saved[1], saved[2], saved[3])
        else:
            uninstall()


def parse_env(value: str | None) -> int | None:
    """Parse a ``TORCHPORT_EMULATE`` value: ``npu`` -> 1, ``npu:N`` -> N, empty/None -> None.

    Raises:
        ConfigError: anything else (the message names the variable).
    """
    from torchport.runtime.device import ConfigError

    if value is None or not value.strip():
        return None
    raw = value.strip().lower()
    name, sep, count = raw.partition(":")
    if name != "npu":
        raise ConfigError(f"environment variable {ENV_VAR}={value!r}: only 'npu' or 'npu:N' can be emulated (e.g. {ENV_VAR}=npu:2)")
    if not sep:
        return 1
    try:
        n = int(count)
    except ValueError:
        raise ConfigError(f"environment variable {ENV_VAR}={value!r}: device count {count!r} is not an integer (e.g. {ENV_VAR}=npu:2)") from None
    if n < 1:
        raise ConfigError(f"environment variable {ENV_VAR}={value!r}: the device count must be at least 1 "
                          f"(e.g. {ENV_VAR}=npu:2, or unset it to run without the emulator)")
    return n


def install_from_env(environ: Mapping[str, str] | None = None, *, verify_autograd: bool = True) -> bool:
    """Install the emulator when ``TORCHPORT_EMULATE=npu[:N]`` is set; return whether it is installed.

    Raises:
        ConfigError: a malformed value (the message names ``TORCHPORT_EMULATE``).
    """
    env = os.environ if environ is None else environ
    devices = parse_env(env.get(ENV_VAR))
    if devices is None:
        return False
    install(devices, verify_autograd=verify_autograd)
    return True
