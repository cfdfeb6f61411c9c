"""The one record every scanner output is rendered from.

A :class:`Finding` is one CUDA-only construct at one place in one file. Text, JSON,
SARIF and CSV reports (:mod:`torchport.migrate.render`), the flake8 plugin and the
``torchport fix`` change list are all views over a list of findings, so they cannot
disagree with each other.

Example::

    from torchport.migrate import scan_source
    for f in scan_source("x = t.cuda()\\n").findings:
        print(f.location, f.code, f.message)     # <string>:1:5 TP101 ...
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Iterable, Literal

__all__ = ["line_count", "Finding", "FileError", "FileResult", "Report", "Severity", "FixSafety", "SEVERITIES", "FIX_SAFETIES"]

Severity = Literal["error", "warning", "info"]
FixSafety = Literal["safe", "unsafe", "none"]
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")
FIX_SAFETIES: tuple[str, ...] = ("safe", "unsafe", "none")


def line_count(text: str) -> int:
    """The lines of ``text`` as a report counts them (a last line without its newline counts)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finding:
    """One CUDA-only construct found in a file.

    Args:
        path: the file, as given on the command line (``"<string>"`` for in-memory source).
        line, column: 1-based line and 1-based column where the construct starts.
        end_line, end_column: where it ends (column is exclusive, 1-based).
        code: the rule code (``"TP101"``).
        name: the rule's kebab-case name (``"cuda-method"``).
        message: what is wrong here and what to write instead.
        severity: ``"error"`` (crashes off CUDA), ``"warning"`` (runs, but wrong or slow
            off CUDA) or ``"info"``.
        fix_safety: ``"safe"`` (applied by ``torchport fix``), ``"unsafe"`` (applied with
            ``--unsafe-fixes``: it can change behaviour) or ``"none"`` (report only).
        fixed: True when ``torchport fix`` rewrote this construct (positions then refer
            to the file before the rewrite).
        cell: in a notebook, the cell (1-based, counting every cell) that ``line`` is relative to; else None.
    """

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    severity: str
    fix_safety: str
    fixed: bool = False
    cell: int | None = None

    @property
    def fixable(self) -> bool:
        """True when a rewrite exists for this construct (safe or unsafe)."""
        return self.fix_safety != "none"

    @property
    def position(self) -> str:
        """``line:column``, in a notebook ``cell N:line L:col C``."""
        if self.cell is not None:
            return f"cell {self.cell}:line {self.line}:col {self.column}"
        return f"{self.line}:{self.column}"

    @property
    def location(self) -> str:
        """``path:line:column``, the form editors and terminals turn into links (``nb.ipynb:cell 3:line 2:col 5``
        in a notebook)."""
        return f"{self.path}:{self.position}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (all fields plus ``fixable``)."""
        out = dataclasses.asdict(self)
        out["file"] = out.pop("path")
        out["fixable"] = self.fixable
        if self.cell is None:
            del out["cell"]
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class FileError:
    """A file that could not be analysed (unreadable, not UTF-8, or not valid Python).

    Scanning continues with the other files; reports list these next to the findings.
    """

    path: str
    message: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"file": self.path, "line": self.line, "message": self.message}


@dataclasses.dataclass(kw_only=True)
class FileResult:
    """What analysing one file produced.

    Attributes:
        path: the file.
        lines: physical lines in the file (counted even when the prefilter skipped it).
        findings: findings after the fix pass (fixed ones carry ``fixed=True``).
        error: set when the file could not be analysed.
        source: the original text (only when a rewrite was produced).
        fixed_source: the rewritten text, or None when nothing was rewritten.
        analysed: False when the text prefilter showed the file cannot contain findings.
        seconds: how long analysing it took (0 when the cache answered).
    """

    path: str
    lines: int = 0
    findings: list[Finding] = dataclasses.field(default_factory=list)
    error: FileError | None = None
    source: str | None = None
    fixed_source: str | None = None
    analysed: bool = False
    seconds: float = 0.0


@dataclasses.dataclass(kw_only=True)
class Report:
    """Everything one ``scan`` / ``fix`` run found, over many files.

    Attributes:
        findings: all findings, ordered by file then position.
        errors: files that could not be analysed.
        files: files considered; ``analysed``: files that passed the text prefilter.
        lines: physical lines over all files considered.
        seconds: wall time of the run.
        dry_run: nothing was written (``fix --diff`` / ``--check``): a finding with ``fixed=True`` is one the
            rewrite shown *would* fix; :attr:`fixed` is then empty and :attr:`would_fix` lists them.
        fixing: a ``fix`` run (``scan`` reports none of ``written`` / ``would_fix``).
        cached: files the scan cache answered.
    """

    findings: list[Finding] = dataclasses.field(default_factory=list)
    errors: list[FileError] = dataclasses.field(default_factory=list)
    files: int = 0
    analysed: int = 0
    lines: int = 0
    seconds: float = 0.0
    dry_run: bool = False
    fixing: bool = False
    cached: int = 0
    results: list[FileResult] = dataclasses.field(default_factory=list, repr=False)

    @classmethod
    def from_results(cls, results: Iterable[FileResult], seconds: float = 0.0) -> "Report":
        """Merge per-file results into one report (sorted by path)."""
        rep = cls(seconds=seconds)
        for res in sorted(results, key=lambda r: r.path):
            rep.results.append(res)
            rep.files += 1
            rep.analysed += int(res.analysed)
            rep.lines += res.lines
            rep.findings.extend(res.findings)
            if res.error is not None:
                rep.errors.append(res.error)
        return rep

    @property
    def remaining(self) -> list[Finding]:
        """Findings that are still in the code (not rewritten by this run; all of them in a dry run)."""
        return list(self.findings) if self.dry_run else [f for f in self.findings if not f.fixed]

    @property
    def fixed(self) -> list[Finding]:
        """Findings this run rewrote (none in a dry run)."""
        return [] if self.dry_run else [f for f in self.findings if f.fixed]

    @property
    def would_fix(self) -> list[Finding]:
        """In a dry run: the findings the rewrite shown would fix."""
        return [f for f in self.findings if f.fixed] if self.dry_run else []

    def status(self, finding: Finding) -> str:
        """``"fixed"``, ``"would fix"`` (dry run) or ``""`` -- the one word every renderer shows."""
        if not finding.fixed:
            return ""
        return "would fix" if self.dry_run else "fixed"

    def summary(self) -> list[dict[str, Any]]:
        """Per-rule counts: ``[{code, name, severity, count, fixed, fixable}]`` sorted by code (a dry run adds
        ``would_fix`` and counts nothing as fixed)."""
        rows: dict[str, dict[str, Any]] = {}
        for f in self.findings:
            row = rows.setdefault(f.code, {"code": f.code, "name": f.name, "severity": f.severity,
                                           "count": 0, "fixed": 0, "fixable": 0,
                                           **({"would_fix": 0} if self.dry_run else {})})
            row["count"] += 1
            row["would_fix" if self.dry_run else "fixed"] += int(f.fixed)
            row["fixable"] += int(f.fixable and not f.fixed)
        return [rows[k] for k in sorted(rows)]

    def severity_counts(self) -> dict[str, int]:
        """``{"error": n, "warning": n, "info": n}`` over remaining findings."""
        counts = collections.Counter(f.severity for f in self.remaining)
        return {s: counts.get(s, 0) for s in SEVERITIES}
