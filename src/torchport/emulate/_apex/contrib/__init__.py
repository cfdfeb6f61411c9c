"""``apex.contrib`` of Ascend's apex: ``combine_tensors`` (one flat buffer over a list of tensors)."""

from .combine_tensors import combine_npu, combine_tensors, get_part_combined_tensor, is_combined_tensor_valid

__torchport_emulated__ = True
__all__ = ["combine_tensors", "combine_npu", "get_part_combined_tensor", "is_combined_tensor_valid"]
