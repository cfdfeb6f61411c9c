"""``torch_npu.utils`` (emulated): the helpers scripts and torch_npu's tests import from it.

``npu_combine_tensors`` / ``get_part_combined_tensor`` / ``is_combined_tensor_valid``: one flat buffer over
a list of tensors, each tensor then a view of its slice -- the same buffer as Ascend apex's
``apex.contrib.combine_tensors`` (one implementation, ``torchport/emulate/_apex/contrib/combine_tensors.py``),
with torch_npu's checks (no ``None``, one dtype, npu, contiguous).
"""

from torch_npu.utils.collect_env import get_cann_version  # noqa: F401

from torchport.emulate._apex.contrib import combine_tensors as _combine

__torchport_emulated__ = True
__all__ = ["get_cann_version", "npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid"]


def npu_combine_tensors(list_of_tensor, require_copy_value=True):
    """Copy the tensors into one zeroed flat npu buffer (values kept when ``require_copy_value``); return it."""
    if len(list_of_tensor) == 0:
        return None
    if any(t is None for t in list_of_tensor):
        raise RuntimeError("torch_npu.utils.npu_combine_tensors: tensors to combine must not be None")
    dtype = list_of_tensor[0].dtype
    for t in list_of_tensor:
        if t.dtype != dtype:
            raise RuntimeError(f"torch_npu.utils.npu_combine_tensors: tensors to combine must have one dtype "
                               f"({dtype} and {t.dtype})")
        if t.device.type != "npu":
            raise RuntimeError(f"torch_npu.utils.npu_combine_tensors: tensors to combine must be on npu, "
                               f"got {t.device.type}")
        if not t.is_contiguous():
            raise RuntimeError("torch_npu.utils.npu_combine_tensors: tensors to combine must be contiguous")
    if sum(t.numel() for t in list_of_tensor) == 0:
        return None
    return _combine.combine_npu(list_of_tensor, require_copy_value)


def get_part_combined_tensor(combined_tensor, index, size):
    """``size`` elements of the combined buffer from ``index`` (a view sharing its memory)."""
    if combined_tensor is None or size == 0:
        return None
    if index + size > combined_tensor.numel():
        raise RuntimeError(f"torch_npu.utils.get_part_combined_tensor: index + size ({index + size}) > the "
                           f"combined tensor's size ({combined_tensor.numel()})")
    return _combine.get_part_combined_tensor(combined_tensor, index, size)


def is_combined_tensor_valid(combined_tensor, list_of_tensor):
    """True when every tensor lies, contiguous, inside the combined buffer's memory."""
    if len(list_of_tensor) == 0:
        return True
    if combined_tensor is None:
        return False
    start = combined_tensor.data_ptr()
    end = start + combined_tensor.numel() * combined_tensor.element_size()
    return all(t is not None and t.is_contiguous() and start <= t.data_ptr() < end for t in list_of_tensor)
