"""``torch.npu.amp`` of the emulated device: autocast, GradScaler, custom_fwd/custom_bwd.

Mirrors torch_npu: ``torch.npu.amp.autocast()`` is ``torch.autocast("npu")`` with
float16 by default; ``torch.npu.amp.GradScaler`` takes torch_npu's extra ``dynamic``
argument and its ``state_dict()`` carries a ``"dynamic"`` key that
``load_state_dict()`` requires.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.npu.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True) -> None:
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.amp.custom_fwd`` for device ``npu``."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``torch.amp.custom_bwd`` for device ``npu``."""
    return torch.amp.custom_bwd(bwd, device_type="npu")


class GradScaler(torch.amp.GradScaler):
    """Dynamic (or static, ``dynamic=False``) loss scaling on the emulated NPU.

    Args:
        init_scale: initial scale factor (default 2**16).
        growth_factor: scale multiplier after ``growth_interval`` clean steps.
        backoff_factor: scale multiplier after a step with inf/nan gradients.
        growth_interval: clean steps between growths.
        dynamic: ``False`` keeps the scale fixed (torch_npu's static loss scale).
        enabled: ``False`` makes every method a pass-through.

    In saturation overflow mode (``torchport.emulate.set_overflow_mode("saturate")``)
    float16 overflows never produce inf; like torch_npu's scaler, a step is then
    skipped when the device's overflow flag is set.

    Like torch_npu's scaler, an overflow found while unscaling any optimizer skips the steps of
    *every* optimizer until :meth:`update` (torch's own scaler skips only the optimizer whose
    gradients overflowed): with ``unscale_(opt0); unscale_(opt1)`` and inf in ``opt1``'s
    gradients, ``step(opt0)`` does nothing either.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        dynamic: bool = True,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "npu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
        self._dynamic = dynamic
        self._has_overflow = False

    def unscale_(self, optimizer: Any) -> None:
        super().unscale_(optimizer)
        if self._enabled:
            found = self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
            if sum(v.item() for v in found.values()):
                self._has_overflow = True

    def _maybe_opt_step(self, optimizer: Any, optimizer_state: dict, *args: Any, **kwargs: Any) -> Any:
        if self._has_overflow:  # torch_npu: one overflow skips every optimizer's step this iteration
            return None
        return super()._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        self._has_overflow = False
        if self._enabled and not self._dynamic and new_scale is None:
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
            return
        super().update(new_scale)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self._enabled:
            state["dynamic"] = self._dynamic
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        super().load_state_dict(state_dict)
        self._dynamic = state_dict["dynamic"]
