"""The Python side of the emulated NPU's operator path: per-operator facts and fault injection.

npu tensors are plain ``torch.Tensor`` with a PrivateUse1 ``TensorImpl`` over host memory
(``_csrc/npu_native.cpp``). How one operator runs on the emulated device::

    autocast (AutocastPrivateUse1 kernels, see _autocast.py)
      -> autograd (AutogradPrivateUse1: torch's own, unchanged)
        -> a PrivateUse1 kernel: factories, copies, views, resize_/set_, dropout (C++),
           fused RNN cells and SyncBatchNorm (Python, _handlers.py / _syncbn.py)
        -> otherwise the C++ boxed fallback: npu arguments aliased as CPU tensors over
           the same bytes (no copy), the CPU kernel runs, results re-tagged as npu

The fallback asks :func:`classify` once per operator (cached in C++) which extra steps it
needs; only operators that need them pay for a call into Python.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from torchport.emulate import _card_rules, _coverage, _numerics
from torchport.emulate._state import SATURATE, STATE

__all__ = ["classify", "on_fallback", "post", "perturb_tensor", "reset_op_cache", "host", "adopt",
           "EmulatorNotInstalled", "WARN_FALLBACK", "UPCAST", "POST", "ALLOW_HOST", "CONTIGUOUS"]

#: bits returned by :func:`classify` (same values as ``OpBits`` in npu_native.cpp; 16 is _numerics.PRE)
WARN_FALLBACK, UPCAST, POST, ALLOW_HOST, CONTIGUOUS = 1, 2, 4, 8, 32
_FP16_MAX = 65504.0

# ops whose index arguments may live on the host (as with CUDA / torch_npu)
_ALLOW_HOST = frozenset({"index", "index_put_", "_index_put_impl_", "index_put"})
# float16/bfloat16 matmuls and convolutions: the host has no fast kernels (fp16 conv falls to
# _slow_conv2d, fp16 mm is ~60x slower than fp32); the NPU's cube unit accumulates in fp32
# anyway, so they run in fp32 and the results are rounded to the low precision
_UPCAST = frozenset({"mm", "bmm", "addmm", "baddbmm", "addmv", "mv", "addbmm", "dot", "vdot",
                     "convolution", "convolution_backward"})
_UNSCALE = "aten::_amp_foreach_non_finite_check_and_unscale_"


class EmulatorNotInstalled(RuntimeError):
    """An emulated npu tensor was used after ``torchport.emulate.uninstall()``."""


def classify(name: str, overload: str) -> int:
    """Which extra steps the fallback takes for operator ``name`` (``"aten::mm"``), as bits."""
    ns, _, base = name.partition("::")
    bits = 0
    if ns == "aten":
        if base in _ALLOW_HOST:
            bits |= ALLOW_HOST
        if base in _UPCAST:  # out= overloads too: torch reaches mm/addmm/bmm on a device through them
            bits |= UPCAST
        bits |= _numerics.classify(name)  # the card's HF32 for conv/matmul operands (set_numerics)
        if _card_rules.contiguous_out(name, overload):  # the card's kernels allocate contiguous results
            bits |= CONTIGUOUS
    if name in STATE.fallback_ops or (STATE.coverage and _would_fall_back(name, overload)):
        bits |= WARN_FALLBACK
    if name in STATE.perturb or (STATE.overflow_mode == SATURATE and _is_functional_or_inplace(name, overload)):
        bits |= POST
    return bits


def _op(name: str, overload: str) -> Any:
    ns, _, base = name.partition("::")
    packet = getattr(getattr(torch.ops, ns), base)
    return getattr(packet, overload or "default")


def _would_fall_back(name: str, overload: str) -> bool:
    try:
        return _coverage.would_fall_back(_op(name, overload))
    except (AttributeError, RuntimeError):
        return False


def _is_functional_or_inplace(name: str, overload: str) -> bool:
    try:
        return not getattr(_op(name, overload), "is_view", False)
    except (AttributeError, RuntimeError):
        return True


def on_fallback(name: str) -> None:
    """Count a run of an operator torch_npu runs on the CPU; warn with torch_npu's text the first time."""
    STATE.fallback_counts[name] = STATE.fallback_counts.get(name, 0) + 1
    if name in STATE.fallback_warned:
        return
    STATE.fallback_warned.add(name)
    warnings.warn(
        f"CAUTION: The operator '{name}' is not currently supported on the NPU backend and will fall back "
        "to run on the CPU. This may have performance implications.",
        UserWarning,
        stacklevel=2,
    )


def post(name: str, outputs: list, mutated: list) -> None:
    """Fault injection after an op, in place on its (host-aliased) results: fp16 saturation
    (sets the overflow flag) and numeric perturbation."""
    if name == _UNSCALE:
        if STATE.overflow_mode == SATURATE and STATE.overflow_flag and mutated:
            mutated[-1].fill_(1.0)  # found_inf: the flag, not inf values, makes the GradScaler skip
            STATE.overflow_flag = False
        return
    eps = STATE.perturb.get(name) if STATE.perturb else None
    seen: set[int] = set()
    for out in list(outputs) + list(mutated):  # an out= result is both: treat it once
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or id(out) in seen:
            continue
        seen.add(id(out))
        if STATE.overflow_mode == SATURATE and out.dtype == torch.float16 and bool(torch.isinf(out).any()):
            STATE.overflow_flag = True
            out.clamp_(-_FP16_MAX, _FP16_MAX)  # +-inf -> +-65504; NaN stays NaN
        if eps:
            out.copy_(perturb_tensor(out, eps))


def perturb_tensor(t: torch.Tensor, eps: float) -> torch.Tensor:
    """Return ``t * (1 + eps * u)``, ``u`` uniform in [-1, 1] from the emulator's own RNG."""
    gen = STATE.perturb_generator
    noise = torch.empty(t.shape, dtype=torch.float32).uniform_(-1.0, 1.0, generator=gen)
    if t.device.type != "cpu":
        noise = noise.to(t.device)  # module-level perturbation: stays differentiable on the device
    return (t.float() * (1.0 + eps * noise)).to(t.dtype)


def reset_op_cache() -> None:
    """Forget the cached per-operator facts (after fault-injection or coverage settings change)."""
    if STATE.native is not None:
        STATE.native.reset_op_cache()


def host(t: torch.Tensor) -> torch.Tensor:
    """The CPU tensor over an npu tensor's bytes (no copy; writes are seen by both)."""
    return STATE.native.host_alias(t)


def adopt(t: torch.Tensor, index: int) -> torch.Tensor:
    """An npu tensor on ``npu:index`` over a CPU tensor's bytes (no copy)."""
    return STATE.native.adopt(t, int(index))
