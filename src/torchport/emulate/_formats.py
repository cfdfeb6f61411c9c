"""torch_npu's storage-format ops on the emulated NPU: ``npu_format_cast`` / ``_`` and ``get_npu_format``.

A real card keeps some tensors in private layouts (NC1HWC0 = 3, FRACTAL_NZ = 29, ...); values
are unchanged by a cast. The emulator records the format on the tensor and keeps the data as is.
"""

from __future__ import annotations

import torch

__all__ = ["npu_format_cast", "npu_format_cast_", "get_npu_format", "ACL_FORMAT_NCHW", "ACL_FORMAT_ND"]

ACL_FORMAT_NCHW = 0
ACL_FORMAT_ND = 2
#: the formats torch_npu accepts (aclFormat)
KNOWN = {-1, 0, 1, 2, 3, 4, 29, 30, 32, 33}


def _check(t: torch.Tensor, fn: str) -> None:
    if not isinstance(t, torch.Tensor) or t.device.type != "npu":
        where = t.device if isinstance(t, torch.Tensor) else type(t).__name__
        raise RuntimeError(f"{fn}: expected a tensor on npu, got {where}")


def get_npu_format(tensor: torch.Tensor) -> int:
    """The tensor's storage format: what it was cast to, else NCHW (0) for 4-d and ND (2) otherwise."""
    _check(tensor, "get_npu_format")
    fmt = getattr(tensor, "_npu_format", None)
    if fmt is not None:
        return fmt
    return ACL_FORMAT_NCHW if tensor.dim() == 4 else ACL_FORMAT_ND


def npu_format_cast(tensor: torch.Tensor, acl_format: int, customize_dtype=None) -> torch.Tensor:
    """A tensor with the same values in format ``acl_format`` (``tensor`` itself when already there)."""
    _check(tensor, "npu_format_cast")
    acl_format = int(acl_format)
    if acl_format not in KNOWN:
        raise RuntimeError(f"npu_format_cast: unsupported acl_format {acl_format}")
    if get_npu_format(tensor) == acl_format:
        return tensor
    out = tensor.clone()
    out._npu_format = acl_format
    return out


def npu_format_cast_(tensor: torch.Tensor, src) -> torch.Tensor:
    """In place: give ``tensor`` the format ``src`` (an int, or another tensor's format)."""
    _check(tensor, "npu_format_cast_")
    fmt = get_npu_format(src) if isinstance(src, torch.Tensor) else int(src)
    tensor._npu_format = fmt
    return tensor
