"""Parity with a prediction: the drift band to expect between a workstation (fp32) and a card's default numerics.

``torchport check --only parity --predict <card>`` trains the check target step for step from one seed
checkpoint, on the same batches, in float32 and in the card's default numerics (HF32 convolutions on
Ascend, TF32 convolutions on NVIDIA: :mod:`torchport.emulate._numerics`), each computed on the host. The
undocumented detail of both formats -- the float32 -> format rounding -- is covered by running the card in
each candidate rounding (nearest-even and toward-zero). Per step the *band* is the envelope of those
trajectories widened by its own width and by the float32 tolerance (the card also sums in another order,
which the host does not reproduce)::

    lo[s] = min(runs[s]) - spread[s] - tol[s]      spread[s] = max(runs[s]) - min(runs[s])
    hi[s] = max(runs[s]) + spread[s] + tol[s]      tol[s] = atol + rtol * |fp32[s]|  (TOLERANCES["fp32"])

With ``--reference card.json`` (a run recorded on the card with ``--record``) the check replays the
prediction from the reference's seed checkpoint and seed and judges the card's loss and grad-norm
trajectories against the band instead of against zero; without one it reports the band: the predicted
drift per step, and from which step a zero-drift parity check would flag the card although nothing is wrong.

Example::

    from torchport.checks.predict import VARIANTS, drift_runs
    runs = drift_runs("tinycnn", list(VARIANTS), steps=20)   # fp32 and each card's default numerics
    {name: run["loss"][-1] - runs["fp32"]["loss"][-1] for name, run in runs.items()}
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from torchport.checks.compare import tolerance_for
from torchport.checks.result import CheckResult, Evidence, Status
from torchport.emulate._numerics import VARIANTS, variant

__all__ = ["VARIANTS", "drift_runs", "band", "predict_parity", "ROUNDINGS_TRIED"]

NAME = "parity"
#: the candidate float32 -> format roundings the band covers (rna differs from rne only on exact ties)
ROUNDINGS_TRIED = ("rne", "rz")


def _cards() -> tuple[str, ...]:
    from torchport.emulate._numerics import CARDS

    return tuple(c for c in CARDS if c != "exact")


def drift_runs(target: Any, variants: list[str], *, steps: int, init: dict | None = None, seed: int | None = None,
               rounding: str | None = None) -> dict[str, dict[str, Any]]:
    """Train ``target`` ``steps`` steps on the host once per variant (:data:`VARIANTS`), same start and batches.

    Returns:
        ``{variant: {"loss": [...], "grad_norm": [...], "weight_norm": [...] (entering each step),
        "data_hash": str, "seconds": float}}``.
    """
    from torchport.checks.parity import cpu_target
    from torchport.checks.target import load_target
    from torchport.checks.trace import run_trace
    from torchport.runtime.checkpoint import to_cpu
    from torchport.runtime.seed import seed_everything

    target = load_target(target)
    if init is None:
        seed_everything(target.seed)
        init = to_cpu(target.build_model().state_dict())
    device = cpu_target()
    out: dict[str, dict[str, Any]] = {}
    for name in variants:
        if name not in VARIANTS:
            raise ValueError(f"drift variant {name!r}: expected one of {', '.join(VARIANTS)}")
        card, flags = VARIANTS[name]
        norms: list[float] = []

        def on_step(s: int, state: Any) -> None:
            import torch

            with torch.no_grad():
                norms.append(float(torch.sqrt(sum(p.detach().double().square().sum() for p in state.model.parameters()))))

        started = time.perf_counter()
        with variant(card, rounding, **flags):
            tr = run_trace(target, device, init, steps=steps, seed=seed, sample=8, full_bytes=0, on_step=on_step)
        out[name] = {"loss": list(tr.loss), "grad_norm": list(tr.grad_norm), "weight_norm": norms,
                     "data_hash": tr.data_hash, "seconds": time.perf_counter() - started}
    return out


def band(fp32: list[float], runs: list[list[float]]) -> tuple[list[float], list[float]]:
    """Per step ``(lo, hi)``: the envelope of ``fp32`` and ``runs`` widened by its spread and the fp32 tolerance."""
    tol = tolerance_for("fp32")
    lo, hi = [], []
    for s, base in enumerate(fp32):
        vals = [base] + [r[s] for r in runs if s < len(r)]
        spread = max(vals) - min(vals)
        slack = spread + tol.atol + tol.rtol * abs(base)
        lo.append(min(vals) - slack)
        hi.append(max(vals) + slack)
    return lo, hi


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def predict_parity(target: Any, card: str, *, steps: int, reference: str | Path | None = None) -> CheckResult:
    """The parity check with ``--predict card``: the drift band, and a recorded card run judged against it."""
    from torchport.checks.target import load_target
    from torchport.checks.trace import Trace, sidecar_file
    from torchport.runtime.checkpoint import CheckpointError, safe_torch_load

    started = time.perf_counter()
    if card not in _cards():
        raise ValueError(f"--predict {card!r}: expected one of {', '.join(_cards())}")
    target = load_target(target)
    ref = init = seed = None
    if reference is not None:
        ref, doc = Trace.load(reference)
        init_file = sidecar_file(reference, doc, "init")
        if not init_file.is_file():
            return CheckResult(name=NAME, status=Status.FAIL, summary=f"seed checkpoint {init_file} is missing",
                               evidence=[Evidence(what="seed checkpoint", measured="missing", where=str(init_file),
                                                  status=Status.FAIL, detail="Copy it beside the reference JSON.")],
                               seconds=time.perf_counter() - started)
        try:
            init = safe_torch_load(init_file, name=init_file)
        except CheckpointError as exc:   # refused (could run code) or unreadable: the check fails in one line
            return CheckResult(name=NAME, status=Status.FAIL, summary=str(exc),
                               evidence=[Evidence(what="seed checkpoint", measured="refused", where=str(init_file),
                                                  status=Status.FAIL, detail=str(exc))],
                               seconds=time.perf_counter() - started)
        seed, steps = ref.seed, min(steps, ref.steps)
    fp32 = drift_runs(target, ["fp32"], steps=steps, init=init, seed=seed)["fp32"]
    preds = {r: drift_runs(target, [card], steps=steps, init=init, seed=seed, rounding=r)[card] for r in ROUNDINGS_TRIED}
    main = preds[ROUNDINGS_TRIED[0]]
    lo, hi = band(fp32["loss"], [p["loss"] for p in preds.values()])
    glo, ghi = band(fp32["grad_norm"], [p["grad_norm"] for p in preds.values()])
    wlo, whi = band(fp32["weight_norm"], [p["weight_norm"] for p in preds.values()])
    n = len(fp32["loss"])
    tol = tolerance_for("fp32")
    drift = [_rel(main["loss"][s], fp32["loss"][s]) for s in range(n)]
    wdrift = [_rel(main["weight_norm"][s], fp32["weight_norm"][s]) for s in range(n)]
    flagged = next((s for s in range(n) if tol.exceeds(fp32["loss"][s], main["loss"][s])), None)
    label = f"{card} default numerics"
    ev = [Evidence(what="predicted", measured=f"{label} ({', '.join(ROUNDINGS_TRIED)} rounding) vs fp32, on the host, "
                   f"{n} steps from one seed checkpoint", status=Status.PASS),
          Evidence(what="predicted loss drift (relative, final / largest)",
                   measured=f"{drift[-1]:.3g} / {max(drift):.3g}" if n else "no steps",
                   where=f"step {max(range(n), key=drift.__getitem__)}" if n else None, status=Status.PASS),
          Evidence(what="predicted weight-norm drift (relative, final / largest)",
                   measured=f"{wdrift[-1]:.3g} / {max(wdrift):.3g}" if n else "no steps", status=Status.PASS),
          Evidence(what="a zero-drift parity check would flag the card from", measured="never" if flagged is None
                   else f"step {flagged}", threshold=tol.describe(), status=Status.PASS,
                   detail="Expected drift, not a bug: judge card runs against the band (--reference with --predict).")]
    if ref is not None:
        if ref.data_hash[:16] != fp32["data_hash"][:16]:
            ev.append(Evidence(what="data hash (reference vs prediction)", measured=fp32["data_hash"][:16],
                               threshold=f"== {ref.data_hash[:16]}", status=Status.FAIL,
                               detail="Different batches: the band does not apply (fix data determinism first)."))
        if ref.precision != "fp32":
            ev.append(Evidence(what="reference precision", measured=ref.precision, threshold="fp32", status=Status.FAIL,
                               detail="The band predicts float32 training; record the card run with --precision fp32."))
        outside = next((s for s in range(min(n, len(ref.loss))) if not lo[s] <= ref.loss[s] <= hi[s]), None)
        ev.append(Evidence(what=f"card loss inside the predicted band ({len(ref.loss[:n])} steps)",
                           measured="yes" if outside is None else f"{ref.loss[outside]:.6g} at step {outside}",
                           threshold=None if outside is None else f"[{lo[outside]:.6g}, {hi[outside]:.6g}]",
                           where=None if outside is None else f"step {outside}",
                           status=Status.PASS if outside is None else Status.FAIL,
                           detail=None if outside is None else "The card left the drift its numerics explain: look for "
                           "a real difference (replay with plain --reference to locate the first diverging module)."))
        gout = next((s for s in range(min(n, len(ref.grad_norm))) if not glo[s] <= ref.grad_norm[s] <= ghi[s]), None)
        ev.append(Evidence(what="card grad norm inside the predicted band",
                           measured="yes" if gout is None else f"{ref.grad_norm[gout]:.6g} at step {gout}",
                           threshold=None if gout is None else f"[{glo[gout]:.6g}, {ghi[gout]:.6g}]",
                           status=Status.PASS if gout is None else Status.WARN))
        zero = next((s for s in range(min(n, len(ref.loss))) if tol.exceeds(fp32["loss"][s], ref.loss[s])), None)
        ev.append(Evidence(what="against zero drift (plain parity)", measured="within" if zero is None
                           else f"exceeds from step {zero}", threshold=tol.describe(), status=Status.PASS))
    series = {"loss fp32": fp32["loss"], f"loss {card} (predicted)": main["loss"], "band low": lo, "band high": hi,
              "grad norm band low": glo, "grad norm band high": ghi, "weight norm fp32": fp32["weight_norm"],
              f"weight norm {card} (predicted)": main["weight_norm"]}
    if ref is not None:
        series["loss card (reference)"] = ref.loss[:n]
    result = CheckResult.from_evidence(
        NAME, ev, ok=(f"card run inside the predicted {label} band over {n} steps" if ref is not None else
                      f"predicted {label} drift over {n} steps: final {drift[-1]:.3g} relative (band in the report)"),
        platform=f"cpu (predicting {card})", series=series, started=started)
    return result
