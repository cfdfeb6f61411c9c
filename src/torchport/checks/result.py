"""The one record every check returns, and the report that collects them.

Principle 8 of the design: a check result is one dataclass; the terminal table,
Markdown, JSON, JUnit XML and HTML are renderers over it (:mod:`torchport.checks.report`).

Example::

    from torchport.checks import CheckResult, Evidence, Status

    r = CheckResult(name="device-audit", status=Status.FAIL,
                    summary="1 op touches a CPU tensor",
                    evidence=[Evidence(what="ops touching CPU tensors", measured=1, threshold=0,
                                       where="model.stem (aten.sub.Tensor, forward)", status=Status.FAIL)])
    r.ok            # False
    r.to_dict()     # plain JSON-ready data
"""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Any

__all__ = ["Status", "Evidence", "CheckResult", "Report", "worst"]


class Status(str, enum.Enum):
    """Outcome of a check or of one piece of evidence; ordered ``pass < skip < warn < fail``."""

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        """Severity order used by :func:`worst`."""
        return {"pass": 0, "skip": 1, "warn": 2, "fail": 3}[self.value]

    def __str__(self) -> str:  # "fail", not "Status.FAIL"
        return self.value


def worst(statuses: Any, default: Status = Status.PASS) -> Status:
    """The most severe status in ``statuses`` (``default`` when empty)."""
    out = default
    for s in statuses:
        s = Status(s)
        if s.rank > out.rank:
            out = s
    return out


@dataclasses.dataclass(kw_only=True)
class Evidence:
    """One measurement behind a verdict: what was measured, against what, and where.

    Args:
        what: the quantity, in words (``"relative loss delta after 100 steps"``).
        measured: the value found (number, string, bool or a small list).
        threshold: the limit it was judged against, stated so a reader can re-judge it
            (``"<= 1e-3"``, ``"== 0"``); None when the item is informational.
        where: the location of the problem: module path, op, tensor name, rank, file.
        status: this item's own verdict.
        detail: one or two sentences: why it matters / how to fix it.
    """

    what: str
    measured: Any = None
    threshold: Any = None
    where: str | None = None
    status: Status = Status.PASS
    detail: str | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"what": self.what, "measured": _jsonable(self.measured), "threshold": _jsonable(self.threshold),
                "where": self.where, "status": self.status.value, "detail": self.detail}


@dataclasses.dataclass(kw_only=True)
class CheckResult:
    """The verdict of one check.

    Args:
        name: the check's name (``"device-audit"``, ``"parity"`` ...).
        status: pass / warn / fail (or skip when the check could not run here).
        summary: one line a human reads first; for failures it names the problem and place.
        evidence: the measurements behind the verdict.
        series: named numeric series for plots (``{"loss A": [...], "loss B": [...]}``,
            ``{"loss scale": [...]}``); renderers that cannot plot ignore them.
        seconds: wall time the check took.
        platform: where it ran (a backend label and index, as ``str(Target)``).
    """

    name: str
    status: Status
    summary: str
    evidence: list[Evidence] = dataclasses.field(default_factory=list)
    series: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    platform: str | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def ok(self) -> bool:
        """True unless the status is fail."""
        return self.status is not Status.FAIL

    @property
    def problems(self) -> list[Evidence]:
        """Evidence items that are warn or fail, most severe first."""
        bad = [e for e in self.evidence if e.status in (Status.WARN, Status.FAIL)]
        return sorted(bad, key=lambda e: -e.status.rank)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``--json`` entry for this check)."""
        return {"name": self.name, "status": self.status.value, "summary": self.summary,
                "platform": self.platform, "seconds": round(self.seconds, 3),
                "evidence": [e.to_dict() for e in self.evidence],
                "series": {k: [_jsonable(v) for v in vals] for k, vals in self.series.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CheckResult":
        """Inverse of :meth:`to_dict` (used to read results back from worker processes)."""
        return cls(name=data["name"], status=Status(data["status"]), summary=data["summary"],
                   evidence=[Evidence(**e) for e in data.get("evidence", [])],
                   series={k: list(v) for k, v in data.get("series", {}).items()},
                   seconds=float(data.get("seconds", 0.0)), platform=data.get("platform"))

    @classmethod
    def from_evidence(cls, name: str, evidence: list[Evidence], *, ok: str, platform: str | None = None,
                      series: dict[str, list[float]] | None = None, started: float | None = None) -> "CheckResult":
        """Build a result whose status is the worst evidence status.

        The summary is ``ok`` when everything passed, else the first problem's
        ``what`` and ``where`` (plus a count of the others). A result that proves nothing here
        (worst status skip) says why: the first skip item's ``what`` and ``detail``.
        """
        status = worst(e.status for e in evidence)
        bad = [e for e in evidence if e.status is status and status in (Status.WARN, Status.FAIL)]
        if bad:
            first = bad[0]
            summary = first.what + (f" at {first.where}" if first.where else "")
            if first.measured is not None and not isinstance(first.measured, (list, dict)):
                summary += f": {_short(first.measured)}"
                if first.threshold is not None:
                    summary += f" (limit {first.threshold})"
            if len(bad) > 1:
                summary += f" (+{len(bad) - 1} more)"
        elif status is Status.SKIP:
            first = next(e for e in evidence if e.status is Status.SKIP)
            summary = first.what + (f": {first.detail}" if first.detail else "")
        else:
            summary = ok
        return cls(name=name, status=status, summary=summary, evidence=evidence, series=dict(series or {}),
                   seconds=(time.perf_counter() - started) if started is not None else 0.0, platform=platform)


@dataclasses.dataclass(kw_only=True)
class Report:
    """All check results of one ``torchport check`` run plus the context they ran in.

    Attributes:
        results: one :class:`CheckResult` per check, in run order.
        meta: target name, platform, versions, command line (free-form, JSON-ready).
    """

    results: list[CheckResult] = dataclasses.field(default_factory=list)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def status(self) -> Status:
        """The worst status over all results."""
        return worst(r.status for r in self.results)

    @property
    def exit_code(self) -> int:
        """1 when any check failed, else 0 (warnings do not fail CI)."""
        return 1 if any(r.status is Status.FAIL for r in self.results) else 0

    def counts(self) -> dict[str, int]:
        """``{"pass": n, "warn": n, "fail": n, "skip": n}``."""
        out = {s.value: 0 for s in Status}
        for r in self.results:
            out[r.status.value] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{"status", "counts", "meta", "checks": [...]}``."""
        return {"format": "torchport-check/1", "status": self.status.value, "counts": self.counts(),
                "meta": _jsonable(self.meta), "checks": [r.to_dict() for r in self.results]}


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value: Any) -> Any:
    """Numbers, strings, lists and dicts as they are; NaN/Inf as strings; the rest via ``str``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return _jsonable(value.item())
        except Exception:
            pass
    return str(value)
