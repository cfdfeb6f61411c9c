"""Renderers over one :class:`~torchport.migrate.finding.Report`: text, JSON, SARIF 2.1.0, CSV.

Each renderer is a pure function ``Report -> str`` (text also has a rich variant for
terminals), so the formats cannot drift apart.

* JSON: ``{"findings": [{file, line, column, end_line, end_column, code, name, message,
  severity, fix_safety, fixable, fixed}], "errors": [...], "summary": [...], ...}``.
* SARIF 2.1.0 for GitHub code scanning (``github/codeql-action/upload-sarif``).
* CSV like msFmkTransplt's change list: ``File,Start Line,End Line,Rule,Message,Fixed``.
* concise: one ``path:line:col: CODE message`` line per finding (what editors and CI problem matchers
  parse, as ruff's ``--output-format concise``).
* github: GitHub Actions workflow commands, ``::error file=…,line=…,col=…,endLine=…,endColumn=…,title=…::…``,
  which GitHub shows as annotations on the pull request.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import PurePath
from typing import Callable

from torchport.migrate.finding import Report

__all__ = ["render", "FORMATS", "to_text", "to_json", "to_sarif", "to_csv", "to_concise", "to_github", "print_rich",
           "to_statistics"]

_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _fix_hint(report: Report) -> str:
    pending = [f for f in report.remaining if not f.fixed]
    safe = sum(1 for f in pending if f.fix_safety == "safe")
    unsafe = sum(1 for f in pending if f.fix_safety == "unsafe")
    parts = []
    if report.would_fix:
        flags = "--write --unsafe-fixes" if any(f.fix_safety == "unsafe" for f in report.would_fix) else "--write"
        parts.append(f"{len(report.would_fix)} would be fixed by the rewrite shown; nothing was written: "
                     f"apply it with `torchport fix {flags}`")
        safe = 0
    if safe:
        parts.append(f"{safe} fixable with `torchport fix --write`")
    if unsafe:
        parts.append(f"{unsafe} more with `--unsafe-fixes`")
    return f" ({', '.join(parts)})" if parts else ""


def summary_line(report: Report) -> str:
    """One line: counts of findings, files, fixes and unparsable files."""
    files = len({f.path for f in report.remaining})
    line = f"{len(report.remaining)} finding(s) in {files} file(s) of {report.files} scanned" + _fix_hint(report)
    if report.fixed:
        line = f"fixed {len(report.fixed)} finding(s); " + line
    if report.errors:
        line += f"; {len(report.errors)} file(s) could not be analysed"
    return line


def to_text(report: Report) -> str:
    """Plain text grouped by file, then a summary by rule."""
    out: list[str] = []
    current = None
    for f in report.findings:
        if f.path != current:
            current = f.path
            out.append(("" if not out else "\n") + f.path)
        mark = report.status(f) if f.fixed else ("[*]" if f.fix_safety == "safe" else "[unsafe fix]" if f.fixable else "")
        out.append(f"  {f.position}  {f.code} {f.severity:<7} {f.message} {mark}".rstrip())
    for e in report.errors:
        out.append(f"{e.path}:{e.line or 0}: error: {e.message}")
    rows = report.summary()
    if rows:
        out.append("\nSummary by rule:")
        for r in rows:
            extra = f", {r['fixed']} fixed" if r["fixed"] else (f", {r['would_fix']} would fix" if r.get("would_fix")
                                                                 else "")
            out.append(f"  {r['code']}  {r['name']:<28} {r['count']:>4}  ({r['severity']}{extra})")
    out.append(summary_line(report))
    return "\n".join(out) + "\n"


def print_rich(report: Report, console=None) -> None:
    """Coloured text report on a terminal (same content as :func:`to_text`)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    colour = {"error": "red", "warning": "yellow", "info": "cyan"}
    current = None
    for f in report.findings:
        if f.path != current:
            current = f.path
            console.print(Text(f.path, style="bold underline"))
        line = Text(f"  {f.position}  ")
        line.append(f.code, style=f"bold {colour.get(f.severity, '')}")
        line.append(f" {f.message}")
        if f.fixed:
            line.append(f"  {report.status(f)}", style="green")
        elif f.fix_safety == "safe":
            line.append("  [*]", style="green")
        elif f.fixable:
            line.append("  [unsafe fix]", style="magenta")
        console.print(line)
    for e in report.errors:
        console.print(Text(f"{e.path}:{e.line or 0}: {e.message}", style="red"))
    rows = report.summary()
    if rows:
        table = Table(title="Summary by rule", show_edge=False)
        done = "would fix" if report.dry_run else "fixed"
        for col in ("code", "name", "severity", "count", done):
            table.add_column(col, justify="right" if col in ("count", done) else "left")
        for r in rows:
            table.add_row(r["code"], r["name"], r["severity"], str(r["count"]),
                          str(r["would_fix" if report.dry_run else "fixed"]))
        console.print(table)
    console.print(summary_line(report))


def _finding_dict(report: Report, f) -> dict:
    """A finding as JSON; in a dry run ``fixed`` is false and ``would_fix`` says whether the rewrite has it."""
    d = f.to_dict()
    if report.dry_run:
        d["would_fix"], d["fixed"] = d["fixed"], False
    return d


def to_json(report: Report) -> str:
    """``{"findings": [...], "errors": [...], "summary": [...], "files", "lines", "seconds"}``; a ``fix`` report
    adds ``"written"`` (whether the rewrites were written) and, when they were not, ``"diffs"``: the unified
    diff of each file the rewrite changes (so ``fix --format json > r.json`` carries everything stdout had)."""
    payload = {
        "tool": "torchport",
        "files": report.files,
        "analysed": report.analysed,
        "lines": report.lines,
        "seconds": round(report.seconds, 3),
        **({"written": not report.dry_run} if report.fixing else {}),
        "findings": [_finding_dict(report, f) for f in report.findings],
        "errors": [e.to_dict() for e in report.errors],
        "summary": report.summary(),
    }
    if report.fixing and report.dry_run:
        from torchport.migrate.runner import unified_diff

        payload["diffs"] = [{"file": r.path, "diff": unified_diff(r.path, r.source, r.fixed_source)}
                            for r in report.results if r.fixed_source is not None and r.source is not None]
    return json.dumps(payload, indent=2) + "\n"


def to_statistics(report: Report) -> str:
    """``--statistics``: one line per rule, ``COUNT  CODE  [*]  name`` (``[*]``: fixable), most frequent first, then
    the summary line -- as ruff's ``--statistics``."""
    rows = sorted(report.summary(), key=lambda r: (-r["count"], r["code"]))
    width = max((len(str(r["count"])) for r in rows), default=1)
    out = [f"{r['count']:>{width}}  {r['code']}  {'[*]' if r['fixable'] else '   '}  {r['name']}" for r in rows]
    out.append(summary_line(report))
    return "\n".join(out) + "\n"


def _uri(path: str) -> str:
    """SARIF ``artifactLocation.uri``: an RFC 3986 URI reference (relative to the working directory, percent-encoded;
    ``file://`` for a path on another drive)."""
    from torchport._escape import uri_ref

    p = PurePath(path)
    if p.is_absolute():
        try:
            p = PurePath(os.path.relpath(path))
        except ValueError:
            return p.as_uri()
    return uri_ref(p.as_posix())


def to_sarif(report: Report) -> str:
    """SARIF 2.1.0 with one run, the rule metadata, results and parse failures as notifications."""
    from torchport import __version__
    from torchport.migrate import catalog

    used = sorted({f.code for f in report.findings})
    rules = [catalog.get(code) for code in used]
    index = {r.code: i for i, r in enumerate(rules)}
    driver_rules = [{
        "id": r.code,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.why},
        "help": {"text": f"{r.why}\n\nUse instead:\n{r.use_instead}",
                 "markdown": f"{r.why}\n\n**Use instead**\n\n```python\n{r.use_instead}```"},
        "defaultConfiguration": {"level": _SARIF_LEVEL[r.severity]},
        "properties": {"fix": r.fix, "tags": ["portability"]},
    } for r in rules]
    results = [{
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": _SARIF_LEVEL[f.severity],
        "message": {"text": f.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": _uri(f.path)},
            "region": {"startLine": f.line, "startColumn": f.column, "endLine": f.end_line,
                       "endColumn": f.end_column},
        }}],
        "properties": {"fixSafety": f.fix_safety, "fixed": f.fixed and not report.dry_run,
                       **({"wouldFix": f.fixed} if report.dry_run else {})},
    } for f in report.findings]
    notifications = [{
        "level": "error",
        "message": {"text": e.message},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(e.path)},
                                            **({"region": {"startLine": e.line}} if e.line else {})}}],
    } for e in report.errors]
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "torchport", "version": __version__, "rules": driver_rules}},
            "results": results,
            "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        }],
    }
    return json.dumps(sarif, indent=2) + "\n"


CSV_HEADER = ("File", "Start Line", "End Line", "Rule", "Message", "Fixed")


def to_csv(report: Report) -> str:
    """One row per finding: ``File,Start Line,End Line,Rule,Message,Fixed`` (msFmkTransplt-style)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    from torchport._escape import csv_cell

    writer.writerow(CSV_HEADER)
    for f in report.findings:
        writer.writerow(tuple(map(csv_cell, (f.path, f.line, f.end_line, f"{f.code} {f.name}", f.message,
                                            report.status(f).replace("fixed", "yes") or "no"))))
    return buf.getvalue()


def to_concise(report: Report) -> str:
    """``path:line:col: CODE message`` per finding still in the code (``[*]`` when fixable), unanalysed files
    as ``path:line:1: error: message``, then the summary line."""
    out = []
    for f in report.remaining:
        mark = " [*]" if f.fix_safety == "safe" else ""
        out.append(f"{f.location}: {f.code}{mark} {f.message}")
    out += [f"{e.path}:{e.line or 1}:1: error: {e.message}" for e in report.errors]
    out.append(summary_line(report))
    return "\n".join(out) + "\n"


def _gh_escape(text: str, *, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def to_github(report: Report) -> str:
    """One GitHub Actions annotation (``::error file=…,line=…,col=…::…``) per finding still in the code and
    per file that could not be analysed."""
    out = []
    for f in report.remaining:
        props = (f"file={_gh_escape(f.path, prop=True)},line={f.line},col={f.column},endLine={f.end_line},"
                 f"endColumn={f.end_column},title={_gh_escape(f'torchport ({f.code})', prop=True)}")
        out.append(f"::{_GITHUB_LEVEL.get(f.severity, 'error')} {props}::{_gh_escape(f'{f.code} {f.message}')}")
    for e in report.errors:
        out.append(f"::error file={_gh_escape(e.path, prop=True)},line={e.line or 1},"
                   f"title=torchport::{_gh_escape(e.message)}")
    return "".join(line + "\n" for line in out)


FORMATS: dict[str, Callable[[Report], str]] = {"text": to_text, "json": to_json, "sarif": to_sarif, "csv": to_csv,
                                               "concise": to_concise, "github": to_github}


def render(report: Report, fmt: str) -> str:
    """Render with a format name from :data:`FORMATS`.

    Raises:
        ValueError: unknown format (lists the known ones).
    """
    try:
        return FORMATS[fmt](report)
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
