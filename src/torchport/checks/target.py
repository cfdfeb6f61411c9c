"""The target protocol: what a check needs from the code under test, and the loop it runs.

A *target* is a :class:`CheckTarget` record of small factories. ``torchport check
--target package.module:factory`` imports ``package.module`` and calls ``factory()``;
the factory returns a :class:`CheckTarget` (or a dict of its fields). A complete,
documented example lives in ``examples/check_target.py``.

The checks drive the target through one short, readable training loop
(:func:`train_step`): forward under autocast, loss, scaled backward, unscale,
optimizer step unless an overflow skipped it, scheduler step only after a real step.

Example::

    from torchport.checks.target import CheckTarget, LoaderSpec, load_target
    target = load_target("my_project.checks:target")        # or load_target(None) for the default
    state = build_state(target, current())                  # model/optimizer/amp on the device
    for batch in iter_batches(target, LoaderSpec(seed=0, batch_size=target.batch_size), steps=3):
        out = train_step(state, batch)                      # StepOutput(loss=2.31, grad_norm=..., stepped=True)
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import warnings
from typing import Any, Callable, Iterable, Iterator

__all__ = [
    "CheckTarget",
    "LoaderSpec",
    "TrainState",
    "StepOutput",
    "TargetError",
    "load_target",
    "default_target",
    "build_state",
    "train_step",
    "iter_batches",
    "split_batch",
    "detach_batch",
    "describe",
]


class TargetError(ValueError):
    """The ``--target`` could not be imported or does not follow the protocol (message says which part)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoaderSpec:
    """Everything a data factory needs to build one epoch's loader.

    Args:
        seed: sampler / augmentation seed.
        epoch: epoch number (call ``sampler.set_epoch(epoch)``; seed augmentation with it).
        rank, world_size: this process's share of the data.
        num_workers: DataLoader worker processes.
        batch_size: samples per batch.
    """

    seed: int = 0
    epoch: int = 0
    rank: int = 0
    world_size: int = 1
    num_workers: int = 0
    batch_size: int = 8


@dataclasses.dataclass(kw_only=True)
class CheckTarget:
    """The code under test, as a handful of factories.

    Args:
        name: shown in reports.
        build_model: ``() -> nn.Module`` on CPU; initial weights come from the torch RNG
            (the checks seed it) — the harness moves the model with ``.to(device)``.
        build_loss: ``(device) -> callable(outputs, targets) -> loss``; the target places its own
            tensors (class weights ...) on ``device``.
        build_loader: ``(LoaderSpec) -> iterable of batches``; a batch is ``(inputs, targets)`` or
            ``(inputs, targets, indices)`` (indices let the data check compare sample order).
        build_optimizer: ``(parameters) -> torch.optim.Optimizer``.
        build_scheduler: optional ``(optimizer) -> LR scheduler`` (stepped once per real step).
        build_scaler: optional ``(torchport Target) -> GradScaler``; default: torchport's AMP
            policy (fp16 gets a scaler where the backend needs one).
        precision: ``"fp32" | "fp16" | "bf16" | "auto"``.
        batch_size: samples per batch.
        seed: base seed for weights, data order and augmentation.
        save_checkpoint: optional ``(path, TrainState) -> None``; default
            :func:`torchport.checks.checkpoint.save_state` (:mod:`torchport.runtime.checkpoint`).
        load_checkpoint: optional ``(path, TrainState) -> None`` restoring everything in place.
        spec: ``"package.module:factory"`` this target came from (set by :func:`load_target`;
            checks that need a fresh process re-import the target through it).
    """

    name: str
    build_model: Callable[[], Any]
    build_loss: Callable[[Any], Callable]
    build_loader: Callable[[LoaderSpec], Iterable]
    build_optimizer: Callable[[Iterable], Any]
    build_scheduler: Callable[[Any], Any] | None = None
    build_scaler: Callable[[Any], Any] | None = None
    precision: str = "fp32"
    batch_size: int = 8
    seed: int = 0
    save_checkpoint: Callable[[str, "TrainState"], None] | None = None
    load_checkpoint: Callable[[str, "TrainState"], None] | None = None
    spec: str | None = None

    def __post_init__(self) -> None:
        for field in ("build_model", "build_loss", "build_loader", "build_optimizer"):
            if not callable(getattr(self, field)):
                raise TargetError(f"target {self.name!r}: {field} must be callable, got {getattr(self, field)!r}")


@dataclasses.dataclass(kw_only=True)
class TrainState:
    """Everything one training run holds; what checkpoints save and restore.

    Attributes:
        model, loss_fn, optimizer, scheduler: as built by the target, model on ``device``.
        amp: the :class:`torchport.Amp` (autocast + scaler).
        device: the torchport ``Target`` the state lives on.
        step: optimizer steps taken (skipped steps included).
    """

    model: Any
    loss_fn: Callable
    optimizer: Any
    scheduler: Any
    amp: Any
    device: Any
    step: int = 0


@dataclasses.dataclass(frozen=True)
class StepOutput:
    """What one :func:`train_step` measured (Python floats: one sync per step)."""

    loss: float
    grad_norm: float
    stepped: bool
    scale: float | None
    lr: float | None


def _coerce(obj: Any, spec: str | None) -> CheckTarget:
    if isinstance(obj, CheckTarget):
        target = obj
    elif isinstance(obj, dict):
        try:
            target = CheckTarget(**obj)
        except TypeError as exc:
            raise TargetError(f"target {spec!r}: {exc}; fields are {[f.name for f in dataclasses.fields(CheckTarget)]}") from None
    else:
        raise TargetError(f"target {spec!r} returned {type(obj).__name__}; return a torchport.checks.CheckTarget "
                          "(see examples/check_target.py)")
    if spec and not target.spec:
        target = dataclasses.replace(target, spec=spec)
    return target


def load_target(spec: str | CheckTarget | None = None) -> CheckTarget:
    """Resolve a target: ``None`` (the default), a :class:`CheckTarget`, or ``"package.module:factory"``.

    Raises:
        TargetError: naming the module or attribute that could not be found, or the wrong return type.
    """
    if spec is None:
        return default_target()
    if isinstance(spec, CheckTarget):
        return spec
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise TargetError(f"--target {spec!r}: expected 'package.module:factory' (e.g. 'examples.check_target:target')")
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise TargetError(f"--target {spec!r}: cannot import {mod_name!r} ({exc}); is its folder on PYTHONPATH?") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise TargetError(f"--target {spec!r}: module {mod_name!r} has no attribute {attr!r}")
    return _coerce(factory() if callable(factory) and not isinstance(factory, CheckTarget) else factory, spec)


def default_target() -> CheckTarget:
    """The reference trainer's target (:func:`torchport.checks.reference.trainer_target`).

    An import error inside torchport is a bug and propagates; the built-in tiny CNN stays available
    explicitly as ``--target torchport.checks.builtin:tiny_target``."""
    from torchport.checks.reference import trainer_target

    return trainer_target()


def describe(target: CheckTarget) -> str:
    """``"name (spec)"`` for reports."""
    return f"{target.name} ({target.spec})" if target.spec else target.name


# ----------------------------------------------------------------------------- the loop

def build_state(target: CheckTarget, device: Any, *, precision: str | None = None, scaler: bool | None = None,
                amp_kwargs: dict[str, Any] | None = None, model: Any = None) -> TrainState:
    """Build model, loss, optimizer, scheduler and AMP for ``target`` on ``device``.

    Args:
        target: the :class:`CheckTarget`.
        device: a torchport ``Target`` (from ``select_device()`` / ``current()``).
        precision: override ``target.precision``.
        scaler: force loss scaling on/off (default: the target's ``build_scaler`` or the backend policy).
        amp_kwargs: extra :class:`torchport.Amp` arguments (``growth_interval``, ``init_scale`` ...).
        model: use this CPU model instead of calling ``build_model`` (e.g. weights from a seed checkpoint).

    Returns:
        A :class:`TrainState` at step 0.
    """
    from torchport.runtime.amp import Amp

    model = (model if model is not None else target.build_model()).to(device.device)
    loss_fn = target.build_loss(device.device)
    optimizer = target.build_optimizer(model.parameters())
    scheduler = target.build_scheduler(optimizer) if target.build_scheduler is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "precision X is not fast here": the fallback is reported by the AMP check
        amp = Amp(precision or target.precision, target=device, scaler=scaler, **(amp_kwargs or {}))
    if target.build_scaler is not None and scaler is not False:
        amp.scaler = target.build_scaler(device)
    return TrainState(model=model, loss_fn=loss_fn, optimizer=optimizer, scheduler=scheduler, amp=amp, device=device)


def split_batch(batch: Any) -> tuple[Any, Any, Any]:
    """``(inputs, targets, indices or None)`` from a tuple/list batch or a dict with those keys."""
    if isinstance(batch, dict):
        return batch["inputs"], batch["targets"], batch.get("indices")
    if isinstance(batch, (tuple, list)) and len(batch) in (2, 3):
        return batch[0], batch[1], (batch[2] if len(batch) == 3 else None)
    raise TargetError(f"a batch must be (inputs, targets[, indices]) or a dict with 'inputs'/'targets'; "
                      f"got {type(batch).__name__}")


def grad_norm(parameters: Iterable, scale: float = 1.0) -> float:
    """Total L2 norm of the gradients divided by ``scale`` (inf/nan propagate)."""
    import torch

    norms = [p.grad.detach().float().norm() for p in parameters if p.grad is not None]
    if not norms:
        return 0.0
    return float(torch.stack([n.to(norms[0].device) for n in norms]).norm().item()) / scale


def _scale(amp: Any) -> float | None:
    scaler = amp.scaler
    if scaler is None or not getattr(scaler, "is_enabled", lambda: True)():
        return None
    return float(scaler.get_scale())


def train_step(state: TrainState, batch: Any, *, before_step: Callable[[TrainState], None] | None = None,
               move: bool = True) -> StepOutput:
    """One training step of the harness loop.

    Args:
        state: the :class:`TrainState`.
        batch: one batch from the target's loader (moved with :func:`torchport.to_device`).
        before_step: called between backward and the optimizer step (the AMP check injects
            an overflow here).
        move: move the batch to the device first.

    Returns:
        :class:`StepOutput`; ``stepped`` is False when the scaler skipped the step (the
        scheduler was then not stepped).
    """
    import contextlib

    from torchport.runtime.step import train_step as one_step

    inputs, targets, _ = split_batch(batch)
    state.model.train()
    seen: dict[str, Any] = {}

    def instrument(phase: str):
        # The shared step with the checks' instrumentation: between backward and the optimizer step,
        # read the loss scale and the (unscaled) gradient norm, then let the caller inject a fault.
        if phase == "optimizer":
            seen["scale"] = _scale(state.amp)
            seen["norm"] = grad_norm(state.model.parameters(), seen["scale"] or 1.0)
            if before_step is not None:
                before_step(state)
        return contextlib.nullcontext()

    loss, stepped = one_step(state.model, (inputs, targets), state.optimizer, state.amp, state.loss_fn,
                             device=state.device.device if move else None, phase=instrument)
    scale, norm = seen["scale"], seen["norm"]
    if stepped and state.scheduler is not None:
        state.scheduler.step()
    state.step += 1
    lr = state.optimizer.param_groups[0].get("lr")
    return StepOutput(loss=float(loss.detach().float().item()), grad_norm=norm, stepped=stepped, scale=scale,
                      lr=float(lr) if lr is not None else None)


def detach_batch(batch: Any) -> Any:
    """A copy of ``batch`` whose tensors own their memory (loaders may reuse output buffers)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, dict):
        return {k: detach_batch(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(detach_batch(v) for v in batch)
    return batch


def iter_batches(target: CheckTarget, spec: LoaderSpec, steps: int, *, start: int = 0) -> Iterator[Any]:
    """``steps`` batches from the target's loader, starting at global batch ``start``; epochs roll over
    (a new loader with ``epoch + 1`` each time one is exhausted)."""
    epoch, seen, produced = spec.epoch, 0, 0
    while produced < steps:
        empty = True
        for batch in target.build_loader(dataclasses.replace(spec, epoch=epoch)):
            empty = False
            if seen >= start:
                yield batch
                produced += 1
                if produced >= steps:
                    return
            seen += 1
        if empty:
            raise TargetError(f"target {target.name!r}: build_loader({spec}) produced no batches")
        epoch += 1


def where_defined(fn: Any) -> str:
    """``module.qualname (file:line)`` of a callable, for evidence that points at user code."""
    fn = getattr(fn, "func", fn)  # functools.partial
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    try:
        return f"{name} ({inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]})"
    except (TypeError, OSError):
        return name
