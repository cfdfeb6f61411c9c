"""``apex.multi_tensor_apply``: ``multi_tensor_applier``, reporting ``available = False``.

apex's fused multi-tensor kernels (``amp_C``) have no stand-in; scripts check
``multi_tensor_applier.available`` and take their per-tensor path, as with an apex built without
its CUDA extensions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MultiTensorApply", "multi_tensor_applier"]


class MultiTensorApply:
    """apex's launcher of fused kernels over tensor lists; here without kernels (``available`` is False)."""

    available = False
    warned = False

    def __init__(self, chunk_size: int) -> None:
        self.chunk_size = chunk_size

    def __call__(self, op: Any, noop_flag_buffer: Any, tensor_lists: Any, *args: Any) -> Any:
        raise RuntimeError("apex.multi_tensor_apply (torchport's apex stand-in) has no fused kernels: check "
                           "multi_tensor_applier.available and use the per-tensor path")


multi_tensor_applier = MultiTensorApply(2048 * 32)
