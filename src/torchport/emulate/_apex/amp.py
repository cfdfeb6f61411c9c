"""``apex.amp`` on ``torch.amp``: ``initialize``, ``scale_loss``, ``master_params``, ``state_dict``.

- ``O0``: fp32, no autocast, no scaling -- exactly plain torch.
- ``O1`` and ``O2``: the model's ``forward`` runs under ``torch.autocast`` (float16) on the
  model's device, floating outputs are cast back to float32 (``torchport.autocast_forward``, the
  same helper ``torchport fix`` writes for apex), and a ``torch.amp.GradScaler``
  scales the loss: dynamic by default (``loss_scale="dynamic"``), static when ``loss_scale`` is
  a number (the scale stays put; an overflowing step is still skipped).
  Difference from apex: apex ``O2`` casts the model to fp16 and keeps fp32 master weights in the
  optimizer; here ``O2`` keeps the weights in fp32 and relies on autocast, like ``O1`` (the
  result is the same up to fp16 rounding; memory use is that of ``O1``).
- ``scale_loss`` yields ``loss * scale``; the gradients stay scaled until ``amp.master_params``
  (e.g. for clipping) or ``optimizer.step()`` unscales them. ``optimizer.step()`` goes through
  the scaler: skipped when a gradient is inf/NaN, then the scale is updated.
- ``register_half_function(module, name)`` / ``register_float_function`` / ``register_promote_function``
  (before ``initialize``, as apex requires): ``module.name`` then runs with its floating tensor arguments cast
  to float16 / float32 / the widest floating type among them.
- ``combine_grad`` (Ascend's fork; its effect, one fused buffer for the gradients, is a speed matter), ``num_losses``, ``keep_batchnorm_fp32``, ``verbosity``... are
  accepted and have no further effect.
"""

from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Iterator

import torch

from torchport.runtime.amp import autocast_forward

__all__ = ["initialize", "scale_loss", "master_params", "state_dict", "load_state_dict", "register_half_function",
           "register_float_function", "register_promote_function"]

_OPT_LEVELS = ("O0", "O1", "O2", "O3")


class _AmpState:
    """The one amp state of a process (apex keeps a global ``_amp_state`` too)."""

    def __init__(self) -> None:
        self.scaler: torch.amp.GradScaler | None = None
        self.static_scale: float | None = None
        self.pending: set[int] = set()   # id() of optimizers whose grads a scale_loss produced


_STATE = _AmpState()


def _device_type(model: torch.nn.Module) -> str:
    for p in model.parameters():
        return p.device.type
    return "cpu"


def _route_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()`` goes through the scaler once a ``scale_loss`` produced its grads.

    The replacement stays a bound method of the optimizer (``optimizer.step.__func__`` exists), so a
    ``torch.optim.lr_scheduler`` built afterwards, ``register_step_pre_hook`` and ``state_dict`` work."""
    if getattr(optimizer.step, "__torchport_amp__", False):
        return  # initialize called twice on one optimizer
    step = optimizer.step
    inside = [False]

    @functools.wraps(step)
    def amp_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        scaler = _STATE.scaler
        if inside[0] or scaler is None or id(optimizer) not in _STATE.pending:
            return step(*args, **kwargs)
        inside[0] = True
        try:
            ret = scaler.step(optimizer, *args, **kwargs)
        finally:
            inside[0] = False
        scaler.update(_STATE.static_scale)
        _STATE.pending.clear()
        return ret

    amp_step.__torchport_amp__ = True
    optimizer.step = types.MethodType(amp_step, optimizer)


def initialize(models: Any, optimizers: Any = None, enabled: bool = True, opt_level: str = "O1",
               loss_scale: Any = None, **_ignored: Any) -> Any:
    """``apex.amp.initialize``: returns ``models`` (and ``optimizers``) in the shape given."""
    if opt_level not in _OPT_LEVELS:
        raise RuntimeError(f"apex.amp.initialize: unknown opt_level {opt_level!r}; use one of {', '.join(_OPT_LEVELS)}")
    model_list = list(models) if isinstance(models, (list, tuple)) else [models]
    opt_list = [] if optimizers is None else (
        list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers])
    on = enabled and opt_level != "O0"
    device_type = _device_type(model_list[0]) if model_list else "cpu"
    static = None if loss_scale in (None, "dynamic") else float(loss_scale)
    _STATE.static_scale = static
    _STATE.pending.clear()
    _STATE.scaler = torch.amp.GradScaler(device_type, init_scale=static or 2.0 ** 16, enabled=on)
    if on:
        for m in model_list:
            autocast_forward(m, torch.float16, device_type)
    for opt in opt_list:
        _route_step(opt)
    if optimizers is None:
        return models
    return models, optimizers


@contextlib.contextmanager
def scale_loss(loss: torch.Tensor, optimizers: Any, loss_id: int = 0, model: Any = None,
               delay_unscale: bool = False, delay_overflow_check: bool = False) -> Iterator[torch.Tensor]:
    """``with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()``."""
    scaler = _STATE.scaler
    if scaler is None:
        raise RuntimeError("apex.amp.scale_loss: call amp.initialize(model, optimizer, ...) first")
    yield scaler.scale(loss)
    for opt in optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]:
        _STATE.pending.add(id(opt))


def master_params(optimizer: torch.optim.Optimizer) -> Iterator[torch.nn.Parameter]:
    """The optimizer's parameters, their gradients unscaled (for clipping before ``step``)."""
    scaler = _STATE.scaler
    if scaler is not None and scaler.is_enabled() and id(optimizer) in _STATE.pending:
        state = scaler._per_optimizer_states[id(optimizer)]
        if state["stage"].name == "READY":
            scaler.unscale_(optimizer)
    for group in optimizer.param_groups:
        yield from group["params"]


def state_dict(destination: dict | None = None) -> dict:
    """``{"loss_scaler0": {"loss_scale": ..., "unskipped": ...}}``, apex's layout."""
    out = {} if destination is None else destination
    scaler = _STATE.scaler
    if scaler is not None and scaler.is_enabled():
        sd = scaler.state_dict()
        out["loss_scaler0"] = {"loss_scale": sd["scale"], "unskipped": sd["_growth_tracker"]}
    return out


def load_state_dict(state: dict) -> None:
    """Restore what :func:`state_dict` (or apex's) saved."""
    scaler = _STATE.scaler
    if scaler is None:
        raise RuntimeError("apex.amp.load_state_dict: call amp.initialize(model, optimizer, ...) first")
    entry = state.get("loss_scaler0")
    if entry is None or not scaler.is_enabled():
        return
    sd = scaler.state_dict()
    sd["scale"] = float(entry["loss_scale"])
    sd["_growth_tracker"] = int(entry.get("unskipped", 0))
    scaler.load_state_dict(sd)


def _cast_wrapper(fn: Any, how: str) -> Any:
    @functools.wraps(fn)
    def cast(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if how == "promote":
            dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors]) if tensors else None
        else:
            dtype = torch.float16 if how == "half" else torch.float32
        def conv(a: Any) -> Any:
            return a.to(dtype) if dtype is not None and isinstance(a, torch.Tensor) and a.is_floating_point() else a
        return fn(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
    return cast


def _register(module: Any, name: str, how: str) -> None:
    if not hasattr(module, name):
        raise ValueError(f"apex.amp.register_{how}_function: {getattr(module, '__name__', module)!r} has no "
                         f"attribute {name!r}")
    setattr(module, name, _cast_wrapper(getattr(module, name), how))


def register_half_function(module: Any, name: str) -> None:
    """``module.name`` runs in float16 (its floating tensor arguments cast)."""
    _register(module, name, "half")


def register_float_function(module: Any, name: str) -> None:
    """``module.name`` runs in float32."""
    _register(module, name, "float")


def register_promote_function(module: Any, name: str) -> None:
    """``module.name`` runs in the widest floating dtype of its arguments."""
    _register(module, name, "promote")
