"""Text renderers: rich terminal summary, Markdown and JSON."""

from __future__ import annotations

import json
from typing import Any

from torchport.checks.result import Report, Status

__all__ = ["render_terminal", "to_markdown", "to_json", "STATUS_STYLE"]

STATUS_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "skip": "dim"}
_ICON = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render_terminal(report: Report, console: Any = None, *, verbose: bool = False) -> None:
    """Print the summary table and the evidence behind each warn/fail (all evidence with ``verbose``)."""
    from rich.console import Console
    from rich.table import Table

    from torchport._escape import terminal_name as t   # names/strings from a target, a reference, a data set

    console = console or Console()
    meta = report.meta
    table = Table(title=f"torchport check -- {t(meta.get('target', '?'))} on {t(meta.get('device', '?'))}",
                  show_lines=False, expand=False)
    table.add_column("check", style="bold")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("summary", overflow="fold")
    for r in report.results:
        s = r.status.value
        table.add_row(t(r.name), f"[{STATUS_STYLE[s]}]{_ICON[s]}[/]", f"{r.seconds:.1f}s", t(r.summary))
    console.print(table)
    for r in report.results:
        items = r.evidence if verbose else r.problems
        if not items:
            continue
        console.print(f"[bold]{t(r.name)}[/] evidence:")
        for e in items:
            s = e.status.value
            line = f"  [{STATUS_STYLE[s]}]{_ICON[s]}[/] {t(e.what)}: {t(_fmt(e.measured))}"
            if e.threshold is not None:
                line += f" [dim](limit {t(_fmt(e.threshold))})[/]"
            if e.where:
                line += f"\n       at {t(e.where)}"
            if e.detail and e.status in (Status.WARN, Status.FAIL):
                line += f"\n       [dim]{t(e.detail)}[/]"
            console.print(line, highlight=False, markup=True, soft_wrap=True)
    c = report.counts()
    style = STATUS_STYLE[report.status.value]
    console.print(f"[{style}]{c['pass']} passed, {c['warn']} warned, {c['fail']} failed, {c['skip']} skipped[/]"
                  f" in {meta.get('seconds', 0):.1f}s")


def to_text(report: Report, *, verbose: bool = False, width: int = 120) -> str:
    """:func:`render_terminal` as plain text (no colour): the ``text`` report file."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=width, color_system=None, force_terminal=False,
                                    highlight=False), verbose=verbose)
    return buf.getvalue()


def _md(text: Any) -> str:
    from torchport._escape import md_cell

    return md_cell(_fmt(text))


def _code(text: Any) -> str:
    from torchport._escape import md_code

    return md_code(text)


def to_markdown(report: Report) -> str:
    """Markdown: a summary table, then one evidence table per check."""
    meta = report.meta
    out = [f"# torchport check: {report.status.value.upper()}", "",
           f"Target {_code(meta.get('target', '?'))} on {_code(meta.get('device', '?'))}"
           f" (torch {_md(meta.get('torch', '?'))}, {meta.get('seconds', 0):.1f}s)", "",
           "| check | status | time | summary |", "|---|---|---|---|"]
    for r in report.results:
        out.append(f"| {_md(r.name)} | **{r.status.value}** | {r.seconds:.1f}s | {_md(r.summary)} |")
    for r in report.results:
        out += ["", f"## {_md(r.name)}: {r.status.value}", "", _md(r.summary), "",
                "| status | what | measured | threshold | where |", "|---|---|---|---|---|"]
        for e in r.evidence:
            out.append(f"| {e.status.value} | {_md(e.what)} | {_md(e.measured)} | {_md(e.threshold)} | {_md(e.where)} |")
        notes = [e for e in r.problems if e.detail]
        if notes:
            out.append("")
            out += [f"- **{_md(e.what)}**: {_md(e.detail)}" for e in notes]
    c = report.counts()
    out += ["", f"{c['pass']} passed, {c['warn']} warned, {c['fail']} failed, {c['skip']} skipped.", ""]
    return "\n".join(out)


def to_json(report: Report) -> str:
    """The report as JSON (see the package docstring for the schema)."""
    return json.dumps(report.to_dict(), indent=2)
