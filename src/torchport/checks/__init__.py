"""torchport.checks: the production-readiness suite behind ``torchport check``.

Six checks, each a function returning one :class:`CheckResult` (pass / warn / fail /
skip + evidence: what was measured, the threshold, where the problem is):

=====================  ==========================================================
:func:`device_audit`   every tensor and op on the selected device; CPU fallbacks
:func:`parity`         loss and module outputs vs a reference from platform A
:func:`amp_behaviour`  autocast, overflow skip + backoff, growth, bf16
:func:`data_determinism`  same batches across runs / workers / platforms
:func:`checkpoint_portability`  save on A, resume on B in a fresh process
:func:`distributed_smoke`  torchrun: backend, all-reduce, barrier, weights
=====================  ==========================================================

They run against a *target* (:class:`CheckTarget`: model / loss / data / optimizer
factories; ``examples/check_target.py``); :func:`run_checks` runs a selection into a
:class:`Report`, which :mod:`torchport.checks.report` renders (terminal, Markdown,
JSON, JUnit XML, HTML with plots).

Example::

    from torchport.checks import run_checks, CheckOptions
    from torchport.checks.report import render_terminal
    report = run_checks("my_project.checks:target", only=["audit", "amp"])
    render_terminal(report)

Importing this package imports no torch; each name loads its module on first use.
"""

from __future__ import annotations

from torchport._lazy import lazy_exports


_EXPORTS = {
    "Status": "torchport.checks.result",
    "Evidence": "torchport.checks.result",
    "CheckResult": "torchport.checks.result",
    "Report": "torchport.checks.result",
    "CheckTarget": "torchport.checks.target",
    "LoaderSpec": "torchport.checks.target",
    "TrainState": "torchport.checks.target",
    "TargetError": "torchport.checks.target",
    "load_target": "torchport.checks.target",
    "default_target": "torchport.checks.target",
    "device_audit": "torchport.checks.audit",
    "parity": "torchport.checks.parity",
    "record_reference": "torchport.checks.parity",
    "amp_behaviour": "torchport.checks.amp",
    "data_determinism": "torchport.checks.data",
    "checkpoint_portability": "torchport.checks.checkpoint",
    "distributed_smoke": "torchport.checks.distributed",
    "run_checks": "torchport.checks.runner",
    "select_checks": "torchport.checks.runner",
    "CheckOptions": "torchport.checks.runner",
    "CHECKS": "torchport.checks.runner",
    "Thresholds": "torchport.checks.compare",
    "Tolerance": "torchport.checks.compare",
    "TOLERANCES": "torchport.checks.compare",
    "compare_tensors": "torchport.checks.compare",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
