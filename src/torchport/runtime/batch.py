"""Move nested batches to the device.

Example::

    images, labels = torchport.to_device((images, labels))   # non_blocking when pinned
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["to_device"]


def to_device(batch: Any, device: Any = None, *, non_blocking: bool | None = None) -> Any:
    """Return ``batch`` with every tensor moved to ``device``.

    Walks dicts, lists, tuples, namedtuples and dataclass instances; other
    objects pass through unchanged.

    Args:
        batch: a tensor or a nested container of tensors.
        device: target device; default the current torchport device.
        non_blocking: default True exactly when a source tensor is in pinned memory
            (an asynchronous copy from pageable memory is not safe to overlap).

    Returns:
        A structure of the same shape on ``device``.
    """
    import torch

    if device is None:
        from torchport.runtime.device import current

        device = current().device
    if not isinstance(device, torch.device):
        device = torch.device(device)

    def move(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            nb = obj.is_pinned() if non_blocking is None else non_blocking
            return obj.to(device, non_blocking=nb)
        if isinstance(obj, dict):
            return type(obj)((k, move(v)) for k, v in obj.items())
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*(move(v) for v in obj))
        if isinstance(obj, (list, tuple)):
            return type(obj)(move(v) for v in obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return dataclasses.replace(obj, **{f.name: move(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init})
        return obj

    return move(batch)
