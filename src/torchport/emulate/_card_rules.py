"""Where the card's kernels accept what the CPU's refuse: int32 class targets (issue 37 item 2).

ModelZoo scripts cast targets to int32 on the device (``target.to(torch.int32)``) and torch_npu's loss
kernels take them; the CPU kernels the emulator reuses insist on int64 ("expected target dtype to be Long").
The operators below get a PrivateUse1 kernel that runs the CPU kernel on the host aliases with the int32
target widened to int64. The list is the intersection of (a) the aten operators torch_npu 2.14.0 has NPU
kernels for (``_coverage.npu_ops()``, op-plugin metadata of the wheel) and (b) those whose CPU kernel refuses
an int32 target. That the card's kernels take int32 for each is an ASSUMPTION from aclnn's documented index
types (int32/int64), checked on hardware only for cross_entropy/nll_loss (ModelZoo's training scripts).
Switch off with ``TORCHPORT_NPU_CARD_RULES=0`` (the CPU's rules then apply).

Contiguous results (the card's layout rule). op-plugin's kernels allocate every result they return with
``OpPreparation::apply_tensor_without_format`` / ``apply_tensor`` / ``ApplyTensorWithSizes``, which end in
``NPUNativeFunctions::empty_with_format`` -> ``empty_tensor_restride(MemoryFormat::Contiguous)``
(Ascend/pytorch ``torch_npu/csrc/framework/utils/OpPreparation.cpp``, ``aten/common/TensorFactories.cpp``;
e.g. op-plugin ``EqKernelNpuOpApi.cpp``, ``TopKKernelNpuOpApi.cpp``). The CPU's TensorIterator instead lays a
result out like its inputs, so ``x.topk(5, 1)[1].t().eq(y)`` is transposed on the CPU and contiguous on a card,
and accuracy code written on the card calls ``.view(-1)`` on it. So a *functional* operator torch_npu has an
NPU kernel for (no ``out=``, not in-place, not a view, no ``memory_format`` argument) returns contiguous
results on the emulated npu (:func:`contiguous_out`, the ``CONTIGUOUS`` bit of the C++ fallback). That every
such kernel allocates this way is an ASSUMPTION drawn from the allocation helpers above, read in the kernels
named, not in all of them. A result dense in channels_last (channels_last_3d) keeps that layout, as on the CPU:
a script asks for it with ``.to(memory_format=...)``, and keeping it keeps a channels_last model's fp32 step
bit for bit the CPU's (tests/emulate/test_emu_fp32_identity.py); that the card keeps it too is NOT checked
(its kernels work in internal formats, NC1HWC0, and the reported strides may be contiguous).

Kernels the card has and the emulator lacked (:func:`host_kernel_ops`): an operator with both a CPU kernel
and a ``CompositeExplicitAutograd[NonFunctional]`` one reaches the latter on PrivateUse1, not the fallback.
For ``native_group_norm`` / ``native_layer_norm`` / ``addr`` / ``all.dims`` / ``any.dims`` that is torch's
decomposition (``math_group_norm`` views its input and fails on a channels_last tensor, which the card's
kernel and the CPU's take); for the structured ones (``eq.Tensor``, ``add.Tensor``, ``topk`` ...) a wrapper that
allocates the result with the CPU's layout before the fallback sees it. Where torch_npu has an NPU kernel for
the operator, the emulator registers the fallback (the CPU kernel on the host aliases) in that slot, as the
card registers its kernel there. This part is not switchable (it is how the card dispatches); the layout is.
"""

from __future__ import annotations

import os

import torch

from torchport.emulate import _coverage

__all__ = ["HANDLERS", "INT_TARGET_OPS", "enabled", "contiguous_out", "host_kernel_ops", "python_kernel_ops"]

_a = torch.ops.aten
#: aten operators (base names) whose int32 target the card takes and the CPU refuses
INT_TARGET_OPS = ("nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
                  "multilabel_margin_loss_forward", "multilabel_margin_loss_backward")


def enabled() -> bool:
    """``TORCHPORT_NPU_CARD_RULES`` unset or not ``0``."""
    return os.environ.get("TORCHPORT_NPU_CARD_RULES", "1").strip() not in ("0", "false", "no", "off")


def _int_target(func, args, kwargs):
    from torchport.emulate._tensor import adopt, host

    dev = next((a.device.index or 0 for a in (*args, *kwargs.values())
                if isinstance(a, torch.Tensor) and a.device.type == "npu"), 0)

    def to_host(a):
        if isinstance(a, torch.Tensor) and a.device.type == "npu":
            h = host(a)
            return h.long() if h.dtype == torch.int32 else h
        return a

    out = func(*[to_host(a) for a in args], **{k: to_host(v) for k, v in kwargs.items()})

    def back(o):
        return adopt(o, dev) if isinstance(o, torch.Tensor) and o.device.type == "cpu" else o
    return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)


def python_kernel_ops() -> tuple:
    """The operators :data:`HANDLERS` may register (whether or not the rules are on now)."""
    return tuple(getattr(_a, n).default for n in INT_TARGET_OPS if hasattr(_a, n))


def _handlers() -> dict:
    if not enabled():
        return {}
    known = _coverage.npu_ops()
    return {getattr(_a, n).default: _int_target for n in INT_TARGET_OPS if n in known}


HANDLERS = _handlers


_COMPOSITE = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _functional(op) -> bool:
    """No out=/in-place/view: every returned tensor is one the kernel allocates; not a factory."""
    schema = op._schema
    if any(a.alias_info is not None for a in schema.arguments):
        return False
    if any(r.alias_info is not None for r in schema.returns) or not schema.returns:
        return False
    if any(a.name == "memory_format" for a in schema.arguments):  # the caller chose the layout (clone, *_like)
        return False
    return any("Tensor" in str(a.type) for a in schema.arguments)


def _overload(name: str, overload: str):
    ns, _, base = name.partition("::")
    if ns != "aten":
        return None
    try:
        return getattr(getattr(torch.ops.aten, base), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def contiguous_out(name: str, overload: str) -> bool:
    """True when operator ``name`` (``"aten::eq"``) / ``overload`` returns contiguous results on the card."""
    if not enabled():
        return False
    op = _overload(name, overload)
    return op is not None and name.partition("::")[2] in _coverage.npu_ops() and _functional(op)


def host_kernel_ops(skip: frozenset = frozenset()) -> list:
    """``name.overload`` of the functional aten operators torch_npu has an NPU kernel for whose PrivateUse1
    dispatch would take a CompositeExplicitAutograd[NonFunctional] kernel rather than the CPU's (``skip``:
    operators with a Python kernel of the emulator)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    known = _coverage.npu_ops()
    out = []
    for qual in torch._C._dispatch_get_all_op_names():
        ns, _, rest = qual.partition("::")
        base, _, overload = rest.partition(".")
        if ns != "aten" or base not in known or qual in skip:
            continue
        if has(qual, "PrivateUse1") or not has(qual, "CPU") or not any(has(qual, k) for k in _COMPOSITE):
            continue
        op = _overload(f"aten::{base}", overload)
        if op is not None and _functional(op):
            out.append(rest)
    return sorted(out)
