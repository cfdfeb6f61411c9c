"""Rewrite CUDA device arguments into the selected device.

The one place that decides what ``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", 1)``,
an integer device index, a ``map_location`` dict and the ``"nccl"`` backend name
mean under the shim.

* ``"cuda"`` / ``torch.device("cuda")`` (no index) -> the *current* device of the
  target, which starts as the selected index (``LOCAL_RANK`` under torchrun) and
  follows ``torch.cuda.set_device``.
* ``"cuda:N"`` / ``torch.device("cuda", N)`` / ``N`` where an int means a device -> index ``N``.
* everything else (``"cpu"``, ``"meta"``, ``"npu:0"``, dtypes, tensors) passes through
  as the very same object.
* On a CPU target every CUDA device becomes ``torch.device("cpu")``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeviceMap", "FollowingMap", "CUDA"]

CUDA = "cuda"
_NCCL = "nccl"


class DeviceMap:
    """Maps CUDA device arguments onto one target.

    Args:
        target: the :class:`~torchport.runtime.device.Target` from device selection.
        dist_backend: the collective backend that replaces ``"nccl"``.
    """

    def __init__(self, target: Any, dist_backend: str) -> None:
        import torch

        self._torch_device = torch.device
        self.type: str = target.type
        self.accelerator: bool = bool(target.is_accelerator)
        self.current: int = int(target.index) if self.accelerator else 0
        self.dist_backend = dist_backend
        self._cpu = torch.device("cpu")
        self._by_index: dict[int, Any] = {}
        self._by_str: dict[str, Any] = {}

    # -- indices -------------------------------------------------------------------
    def device(self, index: int | None = None):
        """The ``torch.device`` for target index ``index`` (default: the current one)."""
        if not self.accelerator:
            return self._cpu
        idx = self.current if index is None else index
        dev = self._by_index.get(idx)
        if dev is None:
            dev = self._by_index[idx] = self._torch_device(self.type, idx)
        return dev

    def index_of(self, value: Any) -> int | None:
        """The device index a CUDA device argument names (None for "current")."""
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            _, _, idx = value.partition(":")
            return int(idx) if idx else None
        idx = getattr(value, "index", None)
        return idx

    def set_current(self, index: int | None) -> None:
        """Follow ``torch.cuda.set_device``: bare ``"cuda"`` now means ``index``. A CPU target has one device,
        index 0 (``current_device()`` answers 0 there, as the fixed code's ``torchport.current().index``)."""
        if index is not None and index >= 0 and self.accelerator:
            self.current = int(index)
            self._by_str.clear()

    # -- rewrites --------------------------------------------------------------------
    def map(self, value: Any, allow_int: bool = False) -> Any:
        """Return the target device for a CUDA device argument, else ``value`` itself.

        Args:
            value: a str, ``torch.device``, int (only when ``allow_int``), or anything.
            allow_int: treat a plain int as a CUDA device index (``Tensor.to(0)``).
        """
        cls = value.__class__
        if cls is str:
            hit = self._by_str.get(value)
            if hit is None:
                hit = self._map_str(value)
                self._by_str[value] = hit
            return value if hit is False else hit
        if cls is self._torch_device:
            if value.type != CUDA:
                return value
            return self.device(value.index)
        if allow_int and cls is int:
            return self.device(value)
        return value

    def _map_str(self, value: str) -> Any:
        if value == CUDA:
            return self.device()
        if value.startswith("cuda:"):
            try:
                return self.device(int(value[5:]))
            except ValueError:
                return False  # let torch raise its own error about the malformed string
        return False

    def map_type(self, device_type: Any) -> Any:
        """For APIs that take a device *type* (autocast, GradScaler): ``"cuda"`` -> ``"npu"``."""
        if device_type.__class__ is str and (device_type == CUDA or device_type.startswith("cuda:")):
            return self.type
        if device_type.__class__ is self._torch_device and device_type.type == CUDA:
            return self.type
        return device_type

    def map_location(self, value: Any) -> Any:
        """``torch.load(map_location=...)``: str / device / dict forms (callables pass through)."""
        if isinstance(value, dict):
            out = {}
            changed = False
            for key, val in value.items():
                new_val = self.map(val)
                new_val = str(new_val) if new_val is not val else val
                changed = changed or new_val is not val
                out[key] = new_val
            return out if changed else value
        return self.map(value, allow_int=True)

    def map_backend(self, backend: Any) -> Any:
        """``"nccl"`` (or ``"cuda:nccl,cpu:gloo"``) -> the target's collective backend."""
        if not isinstance(backend, str) or _NCCL not in backend.lower():
            return backend
        if ":" not in backend:
            return self.dist_backend
        pairs = []
        for part in backend.split(","):
            dev, _, be = part.partition(":")
            dev, be = dev.strip(), be.strip()
            if dev == CUDA:
                if not self.accelerator:
                    continue  # the cpu entry (gloo) already covers a CPU target
                dev = self.type
            if be.lower() == _NCCL:
                be = self.dist_backend
            pairs.append(f"{dev}:{be}")
        if not pairs:
            return self.dist_backend
        return ",".join(pairs)


class FollowingMap(DeviceMap):
    """A :class:`DeviceMap` whose current index is torchport's selection (``torchport.current()``), for fixed
    files: ``torchport.compat.set_device(1)`` / ``with torchport.compat.device(1):`` select device 1
    (``torchport.select_device(index=1)``, what the TP112 fix writes), so ``torchport.device()`` and ``"cuda"``
    under ``run`` keep meaning the same device."""

    @property
    def current(self) -> int:  # type: ignore[override]
        from torchport.runtime.device import current

        t = current()
        return int(t.index) if self.accelerator and t.type == self.type else 0

    @current.setter
    def current(self, value: int) -> None:
        """DeviceMap.__init__ assigns the start index: torchport's selection already holds it."""

    def set_current(self, index: int | None) -> None:
        if index is None or index < 0 or not self.accelerator:
            return
        if index != self.current:
            from torchport.runtime.device import select_device

            select_device(self.type, index=index, warn=False)
        self._by_str.clear()
