"""Renderers over :class:`~torchport.checks.result.Report`: one record, many views.

* :func:`render_terminal` -- rich table + the evidence behind every warn/fail;
* :func:`to_markdown` -- for pull-request comments and CI summaries;
* :func:`to_json` -- ``{"format", "status", "counts", "meta", "checks": [{"name", "status", "summary",
  "evidence": [{"what", "measured", "threshold", "where", "status", "detail"}], "series", ...}]}``;
* :func:`to_junit` -- JUnit XML: one ``testcase`` per check (fail -> ``failure``, skip -> ``skipped``);
* :func:`to_html` -- a self-contained page with the loss overlay (A vs B) and the loss-scale timeline
  as embedded PNGs.

Example::

    from torchport.checks.report import write_reports
    write_reports(report, json="check.json", junit="check.xml", html="check.html", markdown="check.md")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchport.checks.report.html import to_html
from torchport.checks.report.junit import to_junit
from torchport.checks.report.text import render_terminal, to_json, to_markdown

__all__ = ["render_terminal", "to_markdown", "to_json", "to_junit", "to_html", "write_reports"]


def write_reports(report: Any, *, json: str | Path | None = None, junit: str | Path | None = None,
                  html: str | Path | None = None, markdown: str | Path | None = None) -> list[Path]:
    """Write every requested format; returns the paths written."""
    written = []
    for path, render in ((json, to_json), (junit, to_junit), (html, to_html), (markdown, to_markdown)):
        if path is None:
            continue
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render(report), encoding="utf-8")
        written.append(p)
    return written
