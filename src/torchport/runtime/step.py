"""One training step -- copy, forward, backward, optimizer -- shared by bench, profile and data bench.

Callers differ only in instrumentation: ``phase`` wraps each part (the profiler passes its
``prof.phase`` to time them at device-synchronised boundaries; the default does nothing).

Example::

    amp = torchport.Amp("auto")
    for batch in loader:
        loss, stepped = train_step(model, batch, optimizer, amp, loss_fn, device=target.device)
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager

__all__ = ["train_step", "compile_model", "timed_warmup_step", "compile_backend_name", "compile_line"]


def _no_phase(name: str) -> ContextManager[None]:
    return contextlib.nullcontext()


def train_step(model: Any, batch: Any, optimizer: Any, amp: Any, loss_fn: Callable[[Any, Any], Any], *,
               device: Any = None, channels_last: bool = False, clip_grad_norm: float | None = None,
               phase: Callable[[str], ContextManager[Any]] = _no_phase) -> tuple[Any, bool]:
    """Run one optimizer step on ``batch`` = ``(images, labels, ...)``.

    Args:
        model, optimizer, loss_fn: the usual; ``amp`` is a :class:`torchport.Amp` (fp32 = no-op).
        device: move the batch there first (non-blocking from pinned memory); None = already there.
        channels_last: convert the images to the channels_last memory format.
        clip_grad_norm: clip the total gradient norm (after unscaling).
        phase: ``name -> context manager`` around ``copy``, ``forward``, ``backward``, ``optimizer``.

    Returns:
        ``(loss, stepped)``: the loss tensor (not synchronised: call ``.item()`` when you need the
        value) and False when an fp16 overflow skipped the step.
    """
    import torch

    from torchport.runtime.batch import to_device

    with phase("copy"):
        images, labels = batch[0], batch[1]
        if device is not None:
            images, labels = to_device((images, labels), device)
        if channels_last:
            images = images.to(memory_format=torch.channels_last)  # not .contiguous(): Ascend's refuses channels_last
    with phase("forward"):
        with amp.autocast():
            loss = loss_fn(model(images), labels)
    with phase("backward"):
        amp.backward(loss)
    with phase("optimizer"):
        stepped = amp.step(optimizer, clip_grad_norm=clip_grad_norm)
        optimizer.zero_grad(set_to_none=True)
    return loss, stepped


def compile_model(model: Any, target: Any) -> Any:
    """``torch.compile(model)`` with the backend's compiler (``target.backend.compile_backend``).

    Raises:
        ConfigError: the backend has no ``torch.compile`` backend (one line: run without --compile).
    """
    import torch

    from torchport.errors import ConfigError

    backend = target.backend.compile_backend
    if backend is None:
        raise ConfigError(f"--compile: backend {target.backend.label!r} has no torch.compile backend; "
                          "run without --compile")
    return torch.compile(model, backend=backend)


def timed_warmup_step(step: Callable[[], Any], target: Any) -> float:
    """Run ``step`` once between device syncs and return its seconds: the first step of a compiled model is
    its compile (Dynamo traces, the backend compiles forward and backward), counted as warm-up by its callers."""
    import time

    from torchport.runtime.memory import synchronize

    synchronize(target)
    t0 = time.perf_counter()
    step()
    synchronize(target)
    return time.perf_counter() - t0


def compile_backend_name(target: Any) -> str:
    """The backend's ``torch.compile`` backend, as a name (``"inductor"``; a callable's ``__name__``)."""
    backend = target.backend.compile_backend
    return str(getattr(backend, "__name__", None) or backend)


def compile_line(seconds: float, backend: Any) -> str:
    """The line bench, profile and the trainer print for a compiled run's first step."""
    return f"compile: {seconds:.2f} s (backend {backend}; first step, warm-up: not in the timings)"
