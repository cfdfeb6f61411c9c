"""``torch_npu.utils`` (emulated): the helpers scripts and torch_npu's tests import from it.

``npu_combine_tensors`` / ``get_part_combined_tensor`` / ``is_combined_tensor_valid``: one flat buffer over
a list of tensors, each tensor then a view of its slice -- the same buffer as Ascend apex's
``apex.contrib.combine_tensors`` (one implementation, ``torchport/emulate/_apex/contrib/combine_tensors.py``),
with torch_npu's checks (no ``None``, one dtype, npu, contiguous). The card's runtime hooks (``FlopsCounter``,
thread affinity, ``save_async``, the ASD detector) refuse in one line.
"""

from torch_npu.utils.collect_env import get_cann_version  # noqa: F401

from torchport.emulate._apex.contrib.combine_tensors import combine_npu as _combine_npu
from torchport.emulate._apex.contrib.combine_tensors import get_part_combined_tensor as _get_part
from torch_npu._ops._registry import refusal as _refusal

__torchport_emulated__ = True
__all__ = ["npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid", "FlopsCounter",
           "set_thread_affinity", "reset_thread_affinity", "save_async", "get_cann_version"]


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
    return _combine_npu(list_of_tensor, require_copy_value)


def get_part_combined_tensor(combined_tensor, index, size):
    """``size`` elements of the combined buffer from ``index`` (a view sharing its memory)."""
    if combined_tensor is None or size == 0:
        return None
    if index + size > combined_tensor.numel():
        raise RuntimeError(f"torch_npu.utils.get_part_combined_tensor: index + size ({index + size}) > the "
                           f"combined tensor's size ({combined_tensor.numel()})")
    return _get_part(combined_tensor, index, size)


def is_combined_tensor_valid(combined_tensor, list_of_tensor):
    """True when every tensor lies, contiguous, inside the combined buffer's memory."""
    if len(list_of_tensor) == 0:
        return True
    if combined_tensor is None:
        return False
    start = combined_tensor.data_ptr()
    end = start + combined_tensor.numel() * combined_tensor.element_size()
    return all(t is not None and t.is_contiguous() and start <= t.data_ptr() < end for t in list_of_tensor)


_RUNTIME = "it drives the card's runtime (libtorch_npu), which the emulated NPU has not"
FlopsCounter = _refusal("FlopsCounter", "torch_npu.utils", _RUNTIME)
set_thread_affinity = _refusal("set_thread_affinity", "torch_npu.utils", _RUNTIME)
reset_thread_affinity = _refusal("reset_thread_affinity", "torch_npu.utils", _RUNTIME)
save_async = _refusal("save_async", "torch_npu.utils", _RUNTIME + "; use torch.save")
set_asd_loss_scale = _refusal("set_asd_loss_scale", "torch_npu.utils", _RUNTIME)
register_asd_hook = _refusal("register_asd_hook", "torch_npu.utils", _RUNTIME)
