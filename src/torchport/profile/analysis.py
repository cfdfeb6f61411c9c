"""From phase times to a decision: which term dominates the step, and what to do about it.

Phases group into four terms. The term with the largest share of the step is the
dominant one, and the verdict names it:

============  ======================================  ======================
term          phases                                  verdict
============  ======================================  ======================
input         ``data`` (waiting for the loader)       ``input-bound``
copy          ``copy`` (host -> device transfer)      ``copy-bound``
compute       ``forward``, ``backward``, ``optimizer``  ``compute-bound``
other         ``other`` and custom phase names        ``overhead-bound``
============  ======================================  ======================

Optimise the dominant term *on the target platform*, then profile again: the
ranking is a property of the platform (a fast GPU with a slow input pipeline is
input-bound; the same code on an NPU whose first steps compile graphs, or on a CPU,
may be compute-bound).

Example::

    from torchport.profile.analysis import analyze
    a = analyze({"data": 0.08, "copy": 0.002, "forward": 0.01, "backward": 0.02,
                 "optimizer": 0.004, "other": 0.001}, device=str(target))
    a.verdict     # 'input-bound'
    a.advice[0]   # 'Data wait is 68% of the step: the input pipeline ...'
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

__all__ = ["PHASES", "TERMS", "VERDICTS", "Analysis", "analyze", "term_of"]

#: canonical phase names, in step order
PHASES = ("data", "copy", "forward", "backward", "optimizer", "other")
#: term -> phases it covers (anything unlisted counts as "other")
TERMS = {"input": ("data",), "copy": ("copy",), "compute": ("forward", "backward", "optimizer"), "other": ("other",)}
VERDICTS = {"input": "input-bound", "copy": "copy-bound", "compute": "compute-bound", "other": "overhead-bound"}


def term_of(phase: str) -> str:
    """The term a phase belongs to (custom names belong to ``"other"``)."""
    return next((t for t, ps in TERMS.items() if phase in ps), "other")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Analysis:
    """What a profile says.

    Attributes:
        dominant: the largest term (``"input" | "copy" | "compute" | "other"``).
        dominant_phase: the largest phase inside that term.
        fraction: the dominant term's share of the step.
        verdict: ``"input-bound"``, ``"compute-bound"``, ``"copy-bound"`` or ``"overhead-bound"``.
        groups: every term's share of the step.
        advice: what to try, most promising first.
        warning: the cross-platform caveat, naming the device profiled.
    """

    dominant: str
    dominant_phase: str
    fraction: float
    verdict: str
    groups: dict[str, float]
    advice: list[str]
    warning: str


def cross_platform_warning(device: str) -> str:
    """The caveat every profile carries."""
    return (f"This profile ranks bottlenecks on {device} only. A profile from one platform does not rank "
            "another's (a GPU profile can be input-bound where the NPU is compute-bound, and the reverse): "
            "optimise the dominant term measured on the target platform, then re-profile there.")


def _advice(term: str, pct: str, *, precision: str | None, is_accelerator: bool, amp_hint: str | None,
            compile_backend: str | None) -> list[str]:
    if term == "input":
        return [
            f"Data wait is {pct} of the step: the input pipeline, not the device, sets the pace. Do pipeline work: "
            "pack images into shards (large sequential reads), decode faster (libjpeg-turbo / reduced-size JPEG "
            "decode), return uint8 from workers and normalise on the device, prefetch the next batch to the device.",
            "More DataLoader workers help only while cores are idle and the per-sample work is not GIL-bound; "
            "Python-heavy transforms do not scale with threads, and on a small host extra workers compete with the "
            "training process. Measure with `torchport data bench` before and after.",
        ]
    if term == "copy":
        return [
            f"Host->device copy is {pct} of the step. Use pinned host memory (DataLoader pin_memory=True where the "
            "backend benefits; torchport.loader_kwargs sets it) so copies run non_blocking and overlap compute.",
            "Transfer uint8 images (4x fewer bytes than float32) and convert/normalise on the device.",
        ]
    if term == "compute":
        tips = []
        if precision in (None, "fp32") and amp_hint:
            tips.append(f"Forward+backward+optimizer are {pct} of the step: the step is compute-bound. Turn on AMP"
                        f" ({amp_hint} on this backend): `torchport bench` shows what it buys here (seed: ResNet-50 "
                        "on Ascend 910B3, 2.3x).")
        elif precision in (None, "fp32"):   # the precision policy found no fast low precision here
            tips.append(f"Forward+backward+optimizer are {pct} of the step: the step is compute-bound. This device "
                        "runs no low precision faster than fp32 (`torchport doctor`: precision policy), so AMP "
                        "would not help here.")
        else:
            tips.append(f"Forward+backward+optimizer are {pct} of the step (already running {precision}).")
        tips.append("Use channels_last memory format for convolutional models (--channels-last).")
        if compile_backend:
            tips.append(f"Fuse work: torch.compile (backend {compile_backend!r} here), fused/foreach optimizers, "
                        "fused operators from the vendor library.")
        else:
            tips.append("Fuse work: fused/foreach optimizers and the vendor library's fused operators "
                        "(torch.compile is not assumed on this backend).")
        tips.append("Reduce work per sample: lower training resolution for early epochs, or a smaller model.")
        if not is_accelerator:
            tips.append("This ran on the CPU: compute dominates almost any CPU run; profile on the accelerator "
                        "before optimising.")
        return tips
    return [
        f"Time outside the named phases is {pct} of the step: logging, `.item()`/print syncs, metric computation, "
        "checkpointing or Python overhead. Export a trace (--trace DIR) and look at what runs between phases; "
        "log less often and keep metrics on the device.",
    ]


def analyze(phases: Mapping[str, float], *, device: str = "this device", precision: str | None = None,
            is_accelerator: bool = True, amp_hint: str | None = None,
            compile_backend: str | None = "inductor") -> Analysis:
    """Name the dominant term of a step and say what to do.

    Args:
        phases: seconds (or any consistent unit) per phase for one step.
        device: the device label, for the warning.
        precision: the precision the loop ran in (no AMP advice when already low precision).
        is_accelerator: False for a CPU profile (adds a caveat).
        amp_hint: the low precision the backend's policy picks (``auto``), named in the advice; None where
            it picks fp32 (AMP is not advised).
        compile_backend: the backend's ``torch.compile`` backend (None: not supported there).

    Returns:
        An :class:`Analysis`. Ties go to the earlier term in input, copy, compute, other.

    Raises:
        ValueError: no phase time at all.
    """
    total = float(sum(phases.values()))
    if total <= 0:
        raise ValueError("no time was recorded in any phase; profile at least one step")
    groups = {t: 0.0 for t in TERMS}
    for name, sec in phases.items():
        groups[term_of(name)] += float(sec) / total
    dominant = max(groups, key=lambda t: (groups[t], -list(TERMS).index(t)))
    inside = {n: s for n, s in phases.items() if term_of(n) == dominant}
    dominant_phase = max(inside, key=inside.get) if inside else dominant
    pct = f"{groups[dominant] * 100:.0f}%"
    return Analysis(
        dominant=dominant,
        dominant_phase=dominant_phase,
        fraction=groups[dominant],
        verdict=VERDICTS[dominant],
        groups=groups,
        advice=_advice(dominant, pct, precision=precision, is_accelerator=is_accelerator, amp_hint=amp_hint,
                       compile_backend=compile_backend),
        warning=cross_platform_warning(device),
    )
