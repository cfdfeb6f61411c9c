"""Comparing tensors and loss curves across platforms, msprobe style.

Per tensor (a module's output, a gradient) two numbers decide:

* **cosine similarity** of the flattened finite values, and
* **max absolute error**.

With the thresholds of Ascend's msprobe accuracy tool (:class:`Thresholds`):
pass unless ``cosine < 0.99`` *and* ``max abs err > 1e-3`` (then warn); hard fail at
``cosine < 0.9`` or ``max abs err > 1`` or when NaN/Inf appear in different places.

Per loss curve, a tolerance per precision (:data:`TOLERANCES`): step ``i`` diverges when
``|loss_B[i] - loss_A[i]| > atol + rtol * |loss_A[i]|``. fp32 gets a tight one; AMP
(fp16/bf16, 8-11 mantissa bits) a loose one.

Example::

    d = compare_tensors(ref, out)        # TensorDiff(cosine=0.99998, max_abs=3.1e-05, status=pass)
    TOLERANCES["fp32"].exceeds(2.303, 2.310)   # True: 7e-3 > 1e-4 + 1e-3 * 2.303
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from torchport.checks.result import Status

__all__ = ["Thresholds", "TensorDiff", "Tolerance", "TOLERANCES", "tolerance_for", "compare_tensors",
           "tensor_stats", "sample_positions", "MSPROBE"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Thresholds:
    """Per-tensor verdict thresholds (defaults: msprobe's).

    Args:
        warn_cosine, warn_max_abs: warn when cosine < warn_cosine AND max abs err > warn_max_abs.
        fail_cosine, fail_max_abs: fail when cosine < fail_cosine OR max abs err > fail_max_abs.
    """

    warn_cosine: float = 0.99
    warn_max_abs: float = 1e-3
    fail_cosine: float = 0.9
    fail_max_abs: float = 1.0

    def judge(self, cosine: float, max_abs: float, nan_inf_mismatch: bool) -> Status:
        """Status of one tensor comparison."""
        if nan_inf_mismatch or cosine < self.fail_cosine or max_abs > self.fail_max_abs:
            return Status.FAIL
        if cosine < self.warn_cosine and max_abs > self.warn_max_abs:
            return Status.WARN
        return Status.PASS

    def describe(self) -> str:
        """The rule in words, for evidence ``threshold`` fields."""
        return (f"warn: cosine < {self.warn_cosine} and max abs err > {self.warn_max_abs:g}; "
                f"fail: cosine < {self.fail_cosine} or max abs err > {self.fail_max_abs:g} or NaN/Inf mismatch")


MSPROBE = Thresholds()


@dataclasses.dataclass(frozen=True)
class TensorDiff:
    """Result of :func:`compare_tensors`."""

    cosine: float
    max_abs: float
    nan_inf_mismatch: bool
    shape_mismatch: bool
    status: Status
    rel: float = 0.0  #: max abs err / max |reference| (scale-free; catches pure rescaling, which cosine misses)

    def describe(self) -> str:
        """``cosine 0.98, max abs err 0.012`` (+ NaN/Inf or shape notes)."""
        if self.shape_mismatch:
            return "shapes differ"
        text = f"cosine {self.cosine:.6f}, max abs err {self.max_abs:.3g}, rel err {self.rel:.3g}"
        return text + (", NaN/Inf in different places" if self.nan_inf_mismatch else "")


def compare_tensors(a: Any, b: Any, thresholds: Thresholds = MSPROBE) -> TensorDiff:
    """Compare reference ``a`` with ``b`` (any devices/dtypes; computed in float64 on CPU).

    Cosine and max abs error use the positions finite in both; two all-zero tensors
    have cosine 1, one all-zero and one not cosine 0.
    """
    import torch

    a = a.detach().to("cpu", torch.float64).reshape(-1)
    b = b.detach().to("cpu", torch.float64).reshape(-1)
    if a.shape != b.shape:
        return TensorDiff(0.0, math.inf, False, True, Status.FAIL)
    mismatch = bool((torch.isnan(a) != torch.isnan(b)).any() or (torch.isinf(a) & (a != b)).any()
                    or (torch.isinf(b) & (a != b)).any())
    finite = torch.isfinite(a) & torch.isfinite(b)
    fa, fb = a[finite], b[finite]
    rel = 0.0
    if fa.numel() == 0:
        cosine, max_abs = 1.0, 0.0
    else:
        na, nb = float(fa.norm()), float(fb.norm())
        if na == 0.0 and nb == 0.0:
            cosine = 1.0
        elif na == 0.0 or nb == 0.0:
            cosine = 0.0
        else:
            cosine = float((fa @ fb) / (na * nb))
        max_abs = float((fa - fb).abs().max())
        rel = max_abs / max(float(fa.abs().max()), 1e-12)
    return TensorDiff(cosine, max_abs, mismatch, False, thresholds.judge(cosine, max_abs, mismatch), rel)


def tensor_stats(t: Any) -> dict[str, Any]:
    """``{"shape", "dtype", "mean", "std", "min", "max", "norm", "nan", "inf"}`` of ``t`` (one device->host copy)."""
    import torch

    x = t.detach().float()
    finite = torch.isfinite(x)
    xf = torch.where(finite, x, torch.zeros((), dtype=x.dtype, device=x.device))
    n = max(1, int(x.numel()))
    vals = torch.stack([
        xf.sum() / n,
        xf.std() if x.numel() > 1 else xf.sum() * 0,
        torch.where(finite, x, torch.full((), math.inf, device=x.device)).min() if x.numel() else xf.sum() * 0,
        torch.where(finite, x, torch.full((), -math.inf, device=x.device)).max() if x.numel() else xf.sum() * 0,
        xf.norm(),
        torch.isnan(x).sum().float(),
        torch.isinf(x).sum().float(),
    ]).cpu().tolist()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "mean": vals[0], "std": vals[1],
            "min": vals[2], "max": vals[3], "norm": vals[4], "nan": int(vals[5]), "inf": int(vals[6])}


def sample_positions(numel: int, k: int) -> Any:
    """``k`` fixed, evenly spread flat indices into a tensor of ``numel`` elements (all when fewer)."""
    import torch

    if numel <= k:
        return torch.arange(numel)
    return torch.linspace(0, numel - 1, k, dtype=torch.float64).round().long()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tolerance:
    """Loss-curve tolerance: step diverges when ``|b - a| > atol + rtol * |a|``."""

    rtol: float
    atol: float

    def exceeds(self, a: float, b: float) -> bool:
        """True when ``b`` is outside the tolerance around ``a`` (NaN/Inf mismatch counts)."""
        if not (math.isfinite(a) and math.isfinite(b)):
            return not (a == b or (math.isnan(a) and math.isnan(b)))
        return abs(b - a) > self.atol + self.rtol * abs(a)

    def describe(self) -> str:
        """``|dL| <= 1e-4 + 1e-3*|L_ref|``."""
        return f"|dL| <= {self.atol:g} + {self.rtol:g}*|L_ref| at every step"


#: Stated loss tolerances: ``"fp32"`` for AMP off, ``"amp"`` for fp16/bf16 autocast.
TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(rtol=1e-3, atol=1e-4),
    "amp": Tolerance(rtol=5e-2, atol=1e-2),
}


def tolerance_for(precision: str) -> Tolerance:
    """The stated tolerance for a resolved precision (``fp32`` -> AMP off, else AMP on)."""
    return TOLERANCES["fp32" if precision == "fp32" else "amp"]
