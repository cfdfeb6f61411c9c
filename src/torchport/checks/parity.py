"""Check 2, numerical parity: does training on platform B follow the reference from platform A?

Record on A (``torchport check --only parity --record ref.json``)::

    ref.json            metadata, environment, versions, data hash, per-step loss / grad norm,
                        per-module output statistics at step 0, tolerances
    ref.init.pt         the seed checkpoint: initial weights (replays load these, not the RNG)
    ref.trace.pt        step-0 module outputs, per-step samples of module outputs and gradients

Replay on B (``torchport check --only parity --reference ref.json``): same initial weights,
same data order and augmentation (hash checked), deterministic dropout, same precision;
then compare the loss at every step against the stated tolerance (separate for AMP off
and on, :data:`~torchport.checks.compare.TOLERANCES`) and localise the first diverging
module with msprobe's thresholds (:class:`~torchport.checks.compare.Thresholds`).

Without a reference file the check records on CPU into a temporary folder and replays on
the selected device: cpu vs emulated NPU (or a GPU) in one command.

Example::

    from torchport.checks import parity
    parity(record="ref.json", steps=100)          # on A
    r = parity(reference="ref.json")              # on B
    r.status, r.summary   # fail, "loss diverges at step 37 ... first diverging module model.layer2.0.conv1"
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from torchport.checks.compare import MSPROBE, Thresholds, Tolerance, compare_tensors, tolerance_for
from torchport.checks.result import CheckResult, Evidence, Status
from torchport.checks.trace import Trace, run_trace, sidecar, sidecar_file

__all__ = ["parity", "record_reference", "compare_traces", "DEFAULT_STEPS"]

NAME = "parity"
DEFAULT_STEPS = 100


def cpu_target() -> Any:
    """A torchport ``Target`` for the CPU that does not change the process's selected device."""
    from torchport import backends
    from torchport.runtime.device import Target

    return Target(backend=backends.get("cpu"), reason="argument")


def _device_type(platform: str) -> str:
    """``"<type>:0 (emulated)"`` -> ``"<type>"``; a plain device type is returned as it is."""
    return str(platform).split(" ", 1)[0].split(":", 1)[0].lower()


def record_reference(target: Any, path: str | Path, *, device: Any = None, steps: int = DEFAULT_STEPS,
                     precision: str | None = None, on_step: Callable | None = None) -> Trace:
    """Write a parity reference (``path`` + ``.init.pt`` + ``.trace.pt``) by training on ``device``.

    Args:
        target: a :class:`~torchport.checks.target.CheckTarget`, spec string or None (default target).
        path: the JSON file to write.
        device: torchport ``Target`` (default: the current one).
        steps: steps to record.
        precision: override the target's precision.
        on_step: ``(step, TrainState)`` hook before each step.

    Returns:
        The recorded :class:`~torchport.checks.trace.Trace`.
    """
    import torch

    from torchport.checks.target import load_target
    from torchport.runtime.checkpoint import to_cpu
    from torchport.runtime.device import current
    from torchport.runtime.seed import seed_everything

    target = load_target(target)
    device = device or current()
    seed_everything(target.seed)
    init = to_cpu(target.build_model().state_dict())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(init, sidecar(path, "init"))
    trace = run_trace(target, device, init, steps=steps, precision=precision, on_step=on_step)
    tol = tolerance_for(trace.precision)
    trace.save(path, extra={"files": {"trace": sidecar(path, "trace").name, "init": sidecar(path, "init").name},
                            "tolerance": {"rtol": tol.rtol, "atol": tol.atol, "rule": tol.describe()},
                            "thresholds": MSPROBE.describe(), "target_spec": target.spec})
    return trace


def _first_divergence(ref: Trace, new: Trace, thresholds: Thresholds,
                      rel_floor: float) -> tuple[int, str, Any, Status] | None:
    """Where the replay first leaves the reference.

    A module output or gradient (sampled elements) is *flagged* when msprobe's rule warns or
    fails, or when its scale-free relative error exceeds ``rel_floor`` (msprobe's cosine misses
    pure rescaling). At the first step with anything flagged, the origin is the first flagged
    module output in execution order (everything before it matches), else the flagged
    gradient nearest the output (backward runs last layer first).

    Returns:
        ``(step, name, TensorDiff of the origin, worst msprobe status at that step)`` or None.
    """
    def flag(d: Any) -> bool:
        return thresholds.judge(d.cosine, d.max_abs, d.nan_inf_mismatch) is not Status.PASS or d.rel > rel_floor

    steps = min(len(ref.loss), len(new.loss))
    for s in range(steps):
        outs, grads = [], []
        for name in ref.order:
            a, b = ref.samples.get(name), new.samples.get(name)
            if a is not None and b is not None and s < len(a) and s < len(b):
                outs.append((name, compare_tensors(a[s], b[s], thresholds)))
        for name, a in ref.grads.items():
            b = new.grads.get(name)
            if b is not None and s < len(a) and s < len(b):
                grads.append((f"gradient of {name}", compare_tensors(a[s], b[s], thresholds)))
        flagged_out = [(n, d) for n, d in outs if flag(d)]
        flagged_grad = [(n, d) for n, d in grads if flag(d)]
        if flagged_out or flagged_grad:
            name, d = flagged_out[0] if flagged_out else flagged_grad[-1]
            status = max((d_.status for _, d_ in flagged_out + flagged_grad), key=lambda st: st.rank)
            return s, name, d, status
    return None


def compare_traces(ref: Trace, new: Trace, *, tolerance: Tolerance | None = None,
                   thresholds: Thresholds = MSPROBE) -> list[Evidence]:
    """Evidence comparing a replay ``new`` against reference ``ref`` (see module docstring)."""
    tol = tolerance or tolerance_for(ref.precision)
    ev: list[Evidence] = []
    ev.append(Evidence(what="platforms compared", measured=f"A={ref.platform}, B={new.platform}",
                       status=Status.PASS))
    if ref.precision != new.precision:
        ev.append(Evidence(what="precision differs from the reference", measured=new.precision,
                           threshold=ref.precision, status=Status.FAIL,
                           detail="Replay with the same precision (the reference's is used unless overridden)."))
    n = min(len(ref.batch_hashes), len(new.batch_hashes))
    bad_batch = next((i for i in range(n) if ref.batch_hashes[i] != new.batch_hashes[i]), None)
    ev.append(Evidence(what="data hash (inputs + targets of every batch)", measured=new.data_hash[:16],
                       threshold=f"== {ref.data_hash[:16]}", where=None if bad_batch is None else f"batch {bad_batch}",
                       status=Status.PASS if bad_batch is None else Status.FAIL,
                       detail=None if bad_batch is None else "Different data: fix data order / augmentation "
                       "determinism first (see the data-determinism check); numbers cannot match otherwise."))
    steps = min(len(ref.loss), len(new.loss))
    deltas = [abs(new.loss[i] - ref.loss[i]) for i in range(steps)]
    rel = [d / max(abs(ref.loss[i]), 1e-12) for i, d in enumerate(deltas)]
    first_bad = next((i for i in range(steps) if tol.exceeds(ref.loss[i], new.loss[i])), None)
    final = steps - 1
    ev.append(Evidence(what=f"loss after {steps} steps (A vs B)",
                       measured=f"{ref.loss[final]:.6g} vs {new.loss[final]:.6g} (|d|={deltas[final]:.3g}, "
                       f"rel {rel[final]:.3g})" if steps else "no steps",
                       threshold=tol.describe(), status=Status.PASS if first_bad is None else Status.FAIL,
                       where=None if first_bad is None else f"first exceeded at step {first_bad}"))
    if steps:
        worst = max(range(steps), key=lambda i: rel[i] if math.isfinite(rel[i]) else math.inf)
        ev.append(Evidence(what="largest relative loss delta", measured=rel[worst], where=f"step {worst}",
                           threshold=f"<= {tol.rtol:g} (+{tol.atol:g} abs)", status=Status.PASS))
        gd = [abs(new.grad_norm[i] - ref.grad_norm[i]) / max(abs(ref.grad_norm[i]), 1e-12) for i in range(steps)]
        gworst = max(range(steps), key=lambda i: gd[i] if math.isfinite(gd[i]) else math.inf)
        ev.append(Evidence(what="largest relative grad-norm delta", measured=gd[gworst], where=f"step {gworst}",
                           threshold=None, status=Status.PASS))
    step0 = [(name, compare_tensors(ref.full0[name], new.full0[name], thresholds))
             for name in ref.order if name in ref.full0 and name in new.full0]
    flagged0 = [(n_, d) for n_, d in step0 if d.status is not Status.PASS]
    ev.append(Evidence(what="module outputs at step 0 (full tensors)",
                       measured=f"{len(step0) - len(flagged0)}/{len(step0)} within thresholds",
                       threshold=thresholds.describe(), status=flagged0[0][1].status if flagged0 else Status.PASS,
                       where=f"{flagged0[0][0]}: {flagged0[0][1].describe()}" if flagged0 else None))
    located = _first_divergence(ref, new, thresholds, tol.rtol)
    if located is not None:
        s, name, d, status = located
        if first_bad is not None:
            status = Status.FAIL
        ev.append(Evidence(what="first diverging module" if status is not Status.PASS else "largest early deviation",
                           measured=d.describe(),
                           threshold=f"{thresholds.describe()}; located by relative error > {tol.rtol:g}",
                           where=f"{name} (step {s})", status=status,
                           detail="The first module output in execution order (sampled elements) that leaves the "
                           "reference at the first step where anything does; everything before it matches."))
    elif first_bad is not None:
        ev.append(Evidence(what="first diverging module", measured="none found in module outputs or gradients",
                           where=f"step {first_bad}", status=Status.FAIL,
                           detail="Outputs match while the loss does not: look at the loss function and the optimizer."))
    return ev


def parity(target: Any = None, *, reference: str | Path | None = None, record: str | Path | None = None,
           device: Any = None, steps: int | None = None, precision: str | None = None,
           tolerance: Tolerance | None = None, thresholds: Thresholds = MSPROBE,
           on_step: Callable | None = None, reference_device: Any = None) -> CheckResult:
    """The parity check: record a reference, replay one, or (neither given) record on CPU and replay here.

    Args:
        target: :class:`~torchport.checks.target.CheckTarget`, spec string or None.
        reference: a ``ref.json`` to replay against.
        record: write a reference here instead of comparing.
        device: where to run (default: the current torchport target).
        steps: steps (default: the reference's, else :data:`DEFAULT_STEPS`).
        precision: override (default: the reference's, else the target's).
        tolerance: override the stated loss tolerance.
        thresholds: per-tensor thresholds (msprobe's by default).
        on_step: ``(step, TrainState)`` hook before each replayed step (fault injection).
        reference_device: for the no-file mode, where to record (default: cpu).

    Returns:
        A :class:`~torchport.checks.result.CheckResult` named ``parity`` with series
        ``loss A`` / ``loss B`` for the HTML loss overlay.
    """
    import torch

    from torchport.checks.target import load_target
    from torchport.runtime.device import current

    started = time.perf_counter()
    target = load_target(target)
    dev = device or current()
    if record is not None:
        tr = record_reference(target, record, device=dev, steps=steps or DEFAULT_STEPS, precision=precision,
                              on_step=on_step)
        ev = [Evidence(what="reference written", measured=str(record), where=f"{Path(record).name}, "
                       f"{sidecar(record, 'init').name}, {sidecar(record, 'trace').name}", status=Status.PASS),
              Evidence(what="steps recorded", measured=len(tr.loss), status=Status.PASS),
              Evidence(what="final loss", measured=tr.loss[-1] if tr.loss else None, status=Status.PASS),
              Evidence(what="data hash", measured=tr.data_hash[:16], status=Status.PASS)]
        nonfinite = [i for i, x in enumerate(tr.loss) if not math.isfinite(x)]
        if nonfinite:
            ev.append(Evidence(what="non-finite loss while recording", measured=len(nonfinite),
                               where=f"step {nonfinite[0]}", threshold="== 0", status=Status.WARN))
        return CheckResult.from_evidence(NAME, ev, ok=f"reference recorded on {dev}: {len(tr.loss)} steps, "
                                         f"final loss {tr.loss[-1]:.6g}" if tr.loss else "reference recorded",
                                         platform=str(dev), series={"loss A": tr.loss}, started=started)
    tmp = None
    if reference is None:
        tmp = tempfile.TemporaryDirectory(prefix="torchport-parity-")
        reference = Path(tmp.name) / "ref.json"
        record_reference(target, reference, device=reference_device or cpu_target(),
                         steps=steps or DEFAULT_STEPS, precision=precision)
    try:
        ref, doc = Trace.load(reference)
        init_file = sidecar_file(reference, doc, "init")
        if not init_file.is_file():
            return CheckResult(name=NAME, status=Status.FAIL, summary=f"seed checkpoint {init_file} is missing",
                               evidence=[Evidence(what="seed checkpoint", measured="missing", where=str(init_file),
                                                  status=Status.FAIL, detail="Copy it beside the reference JSON.")],
                               platform=str(dev), seconds=time.perf_counter() - started)
        from torchport.runtime.checkpoint import safe_torch_load

        init = safe_torch_load(init_file)
        new = run_trace(target, dev, init, steps=min(steps or ref.steps, ref.steps), precision=precision or ref.precision,
                        seed=ref.seed, on_step=on_step)
    finally:
        if tmp is not None:
            tmp.cleanup()
    ev = compare_traces(ref, new, tolerance=tolerance, thresholds=thresholds)
    if _device_type(ref.platform) == _device_type(new.platform):
        # Recorded and replayed on one device type: agreement is expected and proves nothing across devices
        # (a FAIL/WARN still stands: the same device disagreeing with itself is worth knowing).
        ev.append(Evidence(what="same device (nothing compared across devices)",
                           measured=f"recorded on {ref.platform}, replayed on {new.platform}",
                           threshold="two different device types", status=Status.SKIP,
                           detail=f"recorded on {ref.platform} and replayed on {new.platform}; record on one device "
                           "and replay on another (e.g. --record on CPU, --reference on the NPU) to compare them"))
    series = {"loss A": ref.loss[:len(new.loss)], "loss B": new.loss}
    result = CheckResult.from_evidence(NAME, ev, ok=f"{len(new.loss)} steps on {new.platform} match {ref.platform} "
                                       f"within {(tolerance or tolerance_for(ref.precision)).describe()}",
                                       platform=str(dev), series=series, started=started)
    loss_ev = next(e for e in ev if e.what.startswith("loss after"))
    loc = next((e for e in ev if e.what == "first diverging module"), None)
    if loss_ev.status is Status.FAIL:
        result.summary = (f"loss leaves the tolerance ({loss_ev.where}): A vs B {loss_ev.measured}"
                          + (f"; first diverging module: {loc.where}, {loc.measured}" if loc is not None else ""))
    elif loc is not None and result.status is not Status.PASS and result.problems[0] is loc:
        result.summary = f"first diverging module: {loc.where}, {loc.measured} (loss within tolerance)"
    return result
