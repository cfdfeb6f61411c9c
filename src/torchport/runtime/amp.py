"""One AMP helper for every backend: autocast context + loss scaling + overflow events.

``precision``: ``"fp32"`` (no-op context, no scaler), ``"fp16"`` (autocast + dynamic
loss scaling where the backend needs it), ``"bf16"`` (autocast, no scaler) or
``"auto"`` (the backend's policy: bf16 where it runs fast, else fp16 + scaler; on a CPU
bf16 only where the processor runs it natively, else fp32 -- :mod:`torchport.backends.cpu_precision`).
An explicit low precision the backend runs only slowly (bf16 on an AVX2 CPU) runs as asked, with one
:class:`SlowPrecisionWarning` giving its measured cost.

Example::

    amp = torchport.Amp("auto")
    for x, y in loader:
        with amp.autocast():
            loss = criterion(model(x), y)
        amp.backward(loss)
        stepped = amp.step(optimizer, clip_grad_norm=1.0)   # False when an overflow skipped it
        optimizer.zero_grad(set_to_none=True)
        if stepped:
            scheduler.step()
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import warnings
from typing import Any, Iterable

__all__ = ["Amp", "ScaleEvent", "PRECISIONS", "SlowPrecisionWarning", "load_scaler_state", "autocast", "autocast_forward",
           "policy_dtype", "warn_once"]

from torchport.backends.spec import PRECISIONS, SlowPrecisionWarning  # noqa: E402  (one list: fp32 fp16 bf16 auto amp)
_log = logging.getLogger("torchport.amp")

#: how deep this thread is in autocast regions the backend's AMP policy runs in fp32 (autocast off), opened by
#: :func:`autocast` or by a script's CUDA autocast under ``torchport run``: ``custom_fwd(cast_inputs=...)``
#: (the shim's, and ``torchport.compat.amp``'s) still casts there, as it would inside autocast on the GPU
_POLICY_FP32 = threading.local()


def in_policy_fp32_autocast() -> bool:
    """True inside an autocast region that runs in fp32 by the backend's AMP policy."""
    return getattr(_POLICY_FP32, "depth", 0) > 0


def policy_fp32_region(delta: int) -> None:
    """Enter (+1) or leave (-1) an autocast region the AMP policy runs in fp32 (see :func:`in_policy_fp32_autocast`)."""
    _POLICY_FP32.depth = getattr(_POLICY_FP32, "depth", 0) + delta


_FP32_AUTOCAST: list[type] = []


def _policy_fp32_autocast(device_type: str, cache_enabled: bool | None) -> Any:
    """A disabled ``torch.autocast`` (so also a decorator) that marks its region as run in fp32 by the policy."""
    if not _FP32_AUTOCAST:
        import torch

        class PolicyFP32Autocast(torch.autocast):
            """``torch.autocast(enabled=False)`` that counts its region (:func:`policy_fp32_region`)."""

            def __enter__(self) -> Any:
                policy_fp32_region(+1)
                return super().__enter__()

            def __exit__(self, *exc: Any) -> Any:
                policy_fp32_region(-1)
                return super().__exit__(*exc)

        _FP32_AUTOCAST.append(PolicyFP32Autocast)
    return _FP32_AUTOCAST[0](device_type, enabled=False, cache_enabled=cache_enabled)
_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(note: str, category: type[Warning] = UserWarning, stacklevel: int = 2) -> bool:
    """Warn ``note`` the first time this process sees it (a precision's cost is one line, not one per
    ``Amp``); True when it warned."""
    with _warned_lock:
        if note in _warned:
            return False
        _warned.add(note)
    warnings.warn(note, category, stacklevel=stacklevel + 1)
    return True


@dataclasses.dataclass(frozen=True)
class ScaleEvent:
    """A loss-scale change: ``reason`` is ``"overflow"`` (step skipped) or ``"growth"``."""

    step: int
    old_scale: float
    new_scale: float
    reason: str
    skipped: bool


class Amp:
    """Autocast + GradScaler for the selected backend.

    Args:
        precision: ``"fp32" | "fp16" | "bf16" | "auto"``.
        target: a :class:`~torchport.runtime.device.Target`; default the current one.
        init_scale, growth_factor, backoff_factor, growth_interval: GradScaler knobs.
        static_scale: a fixed loss scale (no growth, no backoff; overflowing steps are
            still skipped).
        log_overflow: log "Gradient overflow. Skipping step; loss scale reduced to X"
            on every skipped step.
        scaler: force loss scaling on (True) / off (False); default per backend policy.

    Attributes:
        precision: the resolved precision (never ``"auto"``).
        dtype: the autocast dtype, or None for fp32.
        scaler: the GradScaler, or None.
        events: list of :class:`ScaleEvent`.
        steps, skipped_steps: counters.

    Note:
        ``torch.amp.GradScaler()`` without a device defaults to cuda and silently
        disables itself elsewhere; this class always passes the selected device.
    """

    def __init__(
        self,
        precision: str = "auto",
        target: Any = None,
        *,
        init_scale: float = 65536.0,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        static_scale: float | None = None,
        log_overflow: bool = False,
        scaler: bool | None = None,
    ) -> None:
        import torch

        from torchport.errors import ConfigError
        from torchport.runtime.device import current

        if precision not in PRECISIONS:
            raise ConfigError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
        self.target = target or current()
        policy = self.target.backend.amp
        resolved, note = policy.resolve(precision, self.target.backend.label)
        if note:   # a slow precision asked for runs as asked (its cost said once); a missing one falls back
            slow = resolved != "fp32" and not policy.usable(resolved)
            warn_once(note, SlowPrecisionWarning if slow else UserWarning, stacklevel=2)
        self.requested = precision
        self.precision = resolved
        self.dtype = precision_dtype(resolved)
        use_scaler = scaler if scaler is not None else (resolved == "fp16" and policy.fp16_needs_scaler)
        self.scaler = None
        self.static = static_scale is not None
        self._static_scale = float(static_scale) if static_scale is not None else None
        if use_scaler:
            if self.static:
                init_scale = float(static_scale)
            self.scaler = _grad_scaler(self.target, init_scale=init_scale, growth_factor=growth_factor,
                                       backoff_factor=backoff_factor, growth_interval=growth_interval)
        self._scale = float(init_scale)
        self._growth, self._backoff, self._growth_interval = float(growth_factor), float(backoff_factor), int(growth_interval)
        self._clean_steps = 0
        self.log_overflow = log_overflow
        self.events: list[ScaleEvent] = []
        self.steps = 0
        self.skipped_steps = 0

    # -- forward -------------------------------------------------------------------
    def autocast(self, enabled: bool = True) -> contextlib.AbstractContextManager:
        """Context manager for the forward pass (a no-op for fp32)."""
        import torch

        if self.dtype is None or not enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.target.type, dtype=self.dtype)  # noqa: TP203 (the policy chose dtype)

    # -- backward / step -----------------------------------------------------------
    def scale(self, loss):
        """The loss multiplied by the current scale (the loss itself without a scaler)."""
        return self.scaler.scale(loss) if self.scaler is not None else loss

    def backward(self, loss, **kwargs: Any) -> None:
        """``scale(loss).backward(**kwargs)``."""
        self.scale(loss).backward(**kwargs)

    def unscale_(self, optimizer) -> None:
        """Unscale gradients in place (before clipping); no-op without a scaler."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer, *, clip_grad_norm: float | None = None, parameters: Iterable | None = None) -> bool:
        """Unscale, optionally clip, step and update the scale.

        Args:
            optimizer: the optimizer.
            clip_grad_norm: max total gradient norm (clipped after unscaling).
            parameters: parameters to clip; default every parameter of ``optimizer``.

        Returns:
            True when the optimizer stepped; False when an overflow skipped the step
            (then do not step the LR scheduler).
        """
        import torch

        self.steps += 1
        if self.scaler is None:
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(_params(optimizer, parameters), clip_grad_norm)
            optimizer.step()
            return True
        self.scaler.unscale_(optimizer)
        if clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(_params(optimizer, parameters), clip_grad_norm)
        self.scaler.step(optimizer)  # syncs once on the found-inf flags (GradScaler's own sync)
        skipped = _found_inf(self.scaler, optimizer) > 0  # already computed: no extra device wait
        self.scaler.update(self._static_scale)  # a static scale is re-imposed after every step
        # Mirror GradScaler's update rule on the host instead of reading the scale back
        # (a get_scale() here would stall the host until the optimizer kernels finish).
        old = self._scale
        if skipped:
            self._clean_steps = 0
            new = old if self.static else old * self._backoff
        else:
            self._clean_steps += 1
            new = old
            if not self.static and self._clean_steps >= self._growth_interval:
                new, self._clean_steps = old * self._growth, 0
        self._scale = new
        if skipped:
            self.skipped_steps += 1
            self.events.append(ScaleEvent(self.steps, old, new, "overflow", True))
            if self.log_overflow:
                _log.warning("Gradient overflow. Skipping step; loss scale reduced to %s", new)
        elif new != old:
            self.events.append(ScaleEvent(self.steps, old, new, "growth", False))
        return not skipped

    @property
    def loss_scale(self) -> float | None:
        """The current loss scale (tracked on the host; None without a scaler)."""
        return self._scale if self.scaler is not None else None

    def _sync_scale_from_scaler(self) -> None:
        """Re-read scale and growth tracker from the scaler (after loading a state)."""
        if self.scaler is not None and self.scaler.is_enabled():
            self._scale = float(self.scaler.get_scale())
            tracker = getattr(self.scaler, "_growth_tracker", None)
            self._clean_steps = int(tracker.item()) if tracker is not None else 0

    # -- state ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Scaler state normalised across vendors' GradScalers (``dynamic`` key always present)."""
        if self.scaler is None:
            return {}
        state = dict(self.scaler.state_dict())
        state["dynamic"] = not self.static
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a scaler state saved by torch, a vendor GradScaler or :meth:`state_dict`."""
        if self.scaler is None or not state:
            return
        load_scaler_state(self.scaler, state)
        self._sync_scale_from_scaler()

    def __repr__(self) -> str:
        scale = f", scale={self.scaler.get_scale()}" if self.scaler is not None else ""
        return f"Amp(precision={self.precision!r}, device={self.target}{scale})"


def _params(optimizer, parameters):
    if parameters is not None:
        return list(parameters)
    return [p for group in optimizer.param_groups for p in group["params"]]


def _grad_scaler(target, **kw):
    import torch

    cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if cls is not None:  # torch >= 2.3: one device-generic scaler
        return cls(target.type, **kw)
    return target.module.amp.GradScaler(**kw)  # older torch: the device module's own scaler


def _found_inf(scaler, optimizer) -> float:
    """Sum of the per-device found-inf flags recorded by ``unscale_`` for ``optimizer``."""
    if not scaler.is_enabled():
        return 0.0
    state = scaler._per_optimizer_states[id(optimizer)]
    return float(sum(v.item() for v in state["found_inf_per_device"].values()))


def load_scaler_state(scaler, state: dict[str, Any]) -> None:
    """Load ``state`` into any GradScaler, adding or dropping the ``dynamic`` key as it expects.

    The Ascend plugin's GradScaler keeps a ``dynamic`` flag and requires it in
    ``load_state_dict``; torch's own scaler rejects nothing but has no such flag.
    """
    state = dict(state)
    dynamic = state.pop("dynamic", True)
    if hasattr(scaler, "_dynamic"):
        state["dynamic"] = dynamic
    scaler.load_state_dict(state)


def precision_dtype(precision: str) -> Any:
    """``"fp16"`` / ``"bf16"`` -> the torch dtype; ``"fp32"`` -> None (autocast off)."""
    import torch

    return {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


def precision_of(dtype: Any) -> str:
    """A torch dtype -> ``"fp16"`` / ``"bf16"``; any other -> ``"fp32"``."""
    import torch

    return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype, "fp32")


def policy_dtype(device_type: str, dtype: Any = None, backend: Any = None) -> tuple[Any, str | None]:
    """``(dtype or None, note)``: what an autocast of ``dtype`` on ``device_type`` runs in under the backend's AMP
    policy (``backends/spec.py`` ``AmpPolicy.substitute``, the CPU's in ``cpu_precision.py``). ``None`` means fp32
    (autocast off); ``note`` says why when the dtype changed. ``dtype`` None: the device type's autocast default.
    ``backend``: the record whose policy applies (default: the one named ``device_type``)."""
    import torch

    from torchport import backends

    try:
        backend = backend if backend is not None else backends.get(device_type)
    except ValueError:      # a device type no backend record names: torch's own behaviour
        return (dtype if dtype is not None else torch.get_autocast_dtype(device_type)), None
    policy = backend.amp
    asked = dtype if dtype is not None else torch.get_autocast_dtype(device_type)
    want = precision_of(asked)
    got = policy.substitute(want)
    if got == want:
        return asked, None
    why = policy.reason()
    note = f"autocast {want} is not fast on {backend.label}: using {got} (the backend's AMP policy{': ' + why if why else ''})"
    return precision_dtype(got), note


def autocast(dtype: Any = None, enabled: bool = True, cache_enabled: bool | None = None,
             device_type: str | None = None) -> Any:
    """``torch.autocast`` on the selected device, in a precision the backend runs fast.

    What ``torchport fix`` writes for a CUDA-only autocast (TP201, TP203), and what ``torchport run`` does for it: an
    asked dtype the backend does not run fast becomes its fallback (bf16 where fp16 is slow), and where no low
    precision is fast (a CPU without native bf16/fp16) the region runs in float32 -- autocast disabled -- instead of
    ~10x slower (:mod:`torchport.backends.cpu_precision`). On CUDA and the NPU it is ``torch.autocast`` as asked.

    Args:
        dtype: the autocast dtype; default the device type's autocast default (fp16 on CUDA and the NPU).
        enabled, cache_enabled: as ``torch.autocast``.
        device_type: default the selected device's (``torchport.current().type``).

    Example::

        with torchport.autocast():                      # a fixed TP201 line
            loss = model(x)
    """
    import torch

    from torchport.runtime.device import current

    device_type = device_type or current().type
    if enabled:
        dtype, note = policy_dtype(device_type, dtype)
        if note is not None:
            warn_once(note, stacklevel=2)
        if dtype is None:   # no fast low precision here: fp32, and custom_fwd(cast_inputs=...) still casts
            return _policy_fp32_autocast(device_type, cache_enabled)
    return torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)  # noqa: TP203 (the policy, above)


class _AutocastForward:
    """The two forward hooks of :func:`autocast_forward` (a picklable object, so ``torch.save(model)`` and
    ``copy.deepcopy(model)`` keep working; the open contexts are per thread, for DataParallel replicas)."""

    def __init__(self, device_type: str, dtype: Any) -> None:
        self.device_type, self.dtype = device_type, dtype
        self._open = threading.local()

    def __getstate__(self) -> dict:
        return {"device_type": self.device_type, "dtype": self.dtype}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["device_type"], state["dtype"])

    def enter(self, module: Any, args: Any) -> None:
        import torch

        ctx = autocast(self.dtype, device_type=self.device_type)   # the backend's AMP policy decides
        ctx.__enter__()
        self._open.__dict__.setdefault("stack", []).append(ctx)

    def exit(self, module: Any, args: Any, output: Any) -> Any:
        self._open.stack.pop().__exit__(None, None, None)
        return _to_float(output)


def _to_float(out: Any) -> Any:
    """Floating tensors in ``out`` (a tensor, list, tuple or dict of them) as float32."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.float() if out.is_floating_point() else out
    if isinstance(out, (list, tuple)) and type(out) in (list, tuple):
        return type(out)(_to_float(o) for o in out)
    if isinstance(out, dict) and type(out) is dict:
        return {k: _to_float(v) for k, v in out.items()}
    return out


def autocast_forward(model: Any, dtype: Any = None, device_type: str | None = None) -> Any:
    """Run ``model``'s forward under ``torch.autocast`` and give its floating outputs back in float32.

    This is apex ``O1`` (``amp.initialize(model, optimizer, opt_level="O1")``) expressed with torch's own
    autocast, for code whose forward call cannot be found statically (``torchport fix`` writes it): the
    module is the same object (its ``state_dict`` keys, ``model.module`` and ``isinstance`` are unchanged),
    the loss computed from its outputs runs in float32 as under apex.

    Args:
        model: an ``nn.Module``; two forward hooks are added (``always_call``: an exception leaves no
            autocast context open).
        dtype: the autocast dtype; default ``torch.float16`` (apex's).
        device_type: the autocast device type; default the selected device's (``torchport.current().type``).

    Returns:
        ``model`` itself.

    Example::

        model = torchport.autocast_forward(model)                 # was: amp.initialize(..., opt_level="O1")
        scaler = torch.amp.GradScaler(torchport.current().type)
    """
    import torch

    from torchport.runtime.device import current

    hooks = _AutocastForward(device_type or current().type, torch.float16 if dtype is None else dtype)
    model.register_forward_pre_hook(hooks.enter)
    model.register_forward_hook(hooks.exit, always_call=True)
    return model
