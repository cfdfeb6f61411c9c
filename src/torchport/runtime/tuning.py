"""``torchport.tune``: backend performance knobs, set once at the boundary, no-ops elsewhere.

Scripts written for one backend set that backend's knobs inline -- cuDNN autotuning on NVIDIA
GPUs, the operator compile mode and private tensor formats on Ascend -- and every one of those
lines fails, or means nothing, on the other backends (``torchport fix`` rewrites them, rules
TP120 and TP606). ``tune`` takes all of them in one call; each
backend record declares the knobs it has (``BackendSpec.knobs``), the selected backend applies
its own, and the rest are ignored. A knob no registered backend knows is an error (a typo would
otherwise be silently ignored).

Example::

    import torchport

    torchport.tune(cudnn_benchmark=True, jit_compile=False, allow_internal_format=False)
    # on CUDA: {"cudnn_benchmark": True, "jit_compile": False, "allow_internal_format": False}
"""

from __future__ import annotations

from typing import Any

from torchport import backends
from torchport.errors import ConfigError

__all__ = ["tune", "known_knobs"]


def known_knobs() -> dict[str, list[str]]:
    """``{knob: [backends that have it]}`` over every registered backend."""
    out: dict[str, list[str]] = {}
    for spec in backends.specs():
        for knob in spec.knobs:
            out.setdefault(knob, []).append(spec.name)
    return dict(sorted(out.items()))


def tune(target: Any = None, **knobs: Any) -> dict[str, bool]:
    """Apply backend tuning knobs on the selected backend; knobs it lacks are no-ops.

    Args:
        target: a :class:`~torchport.Target` (default: :func:`torchport.current`).
        **knobs: knob name -> value. Built in: ``cudnn_benchmark``, ``cudnn_deterministic``,
            ``matmul_allow_tf32``, ``cudnn_allow_tf32`` (cuda); ``jit_compile``,
            ``allow_internal_format``, ``matmul_allow_hf32``, ``conv_allow_hf32`` (npu).

    Returns:
        ``{knob: applied}``: True where the selected backend set it, False where it has no such
        knob (or this torch build lacks it).

    Raises:
        ConfigError: a knob that no registered backend declares (the message lists the known ones).
    """
    from torchport.runtime.device import current

    known = known_knobs()
    unknown = sorted(set(knobs) - set(known))
    if unknown:
        listing = ", ".join(f"{k} ({'/'.join(v)})" for k, v in known.items())
        raise ConfigError(f"torchport.tune: unknown knob(s) {', '.join(unknown)}; known: {listing}")
    spec = (target or current()).backend
    applied: dict[str, bool] = {}
    for name, value in knobs.items():
        setter = spec.knobs.get(name)
        applied[name] = bool(setter(value)) if setter is not None else False
    return applied
