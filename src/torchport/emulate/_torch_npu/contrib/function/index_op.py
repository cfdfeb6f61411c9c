"""``torch_npu.contrib.function.index_op`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import npu_fast_condition_index_put  # noqa: F401

__torchport_emulated__ = True
__all__ = ["npu_fast_condition_index_put"]
