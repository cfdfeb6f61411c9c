"""Which aten operators torch_npu 2.14.0 runs on the NPU (the rest fall back to the CPU on a card).

Source: the op-plugin metadata shipped in the torch_npu 2.14.0 wheel,
``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`` and ``npu_native_functions.yaml``
(sections ``supported``, ``autograd``, ``symint``, ``quant``): the code generator registers an
NPU kernel for exactly these. ``data/torch_npu_2_14_0_npu_ops.txt`` holds the operator names.

An operator reaching the emulated backend is "unsupported on the NPU" when its name is not in
that list and torch has no backend-independent kernel for it (``CompositeExplicitAutograd`` or
``...NonFunctional``: those run on any backend). Such operators warn with torch_npu's CPU-fallback
text once each, exactly as on hardware, and are counted in ``torchport.emulate.fallback_stats()``.
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["SOURCE", "npu_ops", "would_fall_back"]

#: where the operator list comes from (shown by ``torchport doctor``)
SOURCE = "torch_npu 2.14.0 wheel op-plugin metadata (npu_native_functions_by_codegen.yaml), extracted 2026-11-30"
_FILE = Path(__file__).parent / "data" / "torch_npu_2_14_0_npu_ops.txt"
_ops: list = []
_BACKEND_FREE = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutograd")


def npu_ops() -> frozenset:
    """Base names (``"convolution"``) of the aten operators torch_npu implements for the NPU."""
    if not _ops:
        names = [ln.strip() for ln in _FILE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        _ops.append(frozenset(names))
    return _ops[0]


def would_fall_back(func: torch._ops.OpOverload) -> bool:
    """True when ``func`` would run through torch_npu's CPU fallback on a card."""
    ns, _, base = func._schema.name.partition("::")
    if ns != "aten" or base in npu_ops():
        return False
    name = func.name()
    return not any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _BACKEND_FREE)
