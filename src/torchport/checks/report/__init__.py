"""Renderers over :class:`~torchport.checks.result.Report`: one record, many views.

* :func:`render_terminal` -- rich table + the evidence behind every warn/fail (:func:`to_text`: as plain text);
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
from typing import Any, Callable

from torchport._json import write_text
from torchport.checks.report.html import to_html
from torchport.checks.report.junit import to_junit
from torchport.checks.report.text import render_terminal, to_json, to_markdown, to_text

__all__ = ["render_terminal", "to_text", "to_markdown", "to_json", "to_junit", "to_html", "write_reports",
           "RENDERERS"]

#: Report format name -> renderer (the names ``torchport check --format`` / ``-o FMT:FILE`` use).
RENDERERS: dict[str, Callable[[Any], str]] = {"text": to_text, "json": to_json, "junit": to_junit,
                                              "markdown": to_markdown, "html": to_html}


def write_reports(report: Any, *, json: str | Path | None = None, junit: str | Path | None = None,
                  html: str | Path | None = None, markdown: str | Path | None = None) -> list[Path]:
    """Write every requested format (atomically, parents created); returns the paths written."""
    written = []
    for fmt, path in (("json", json), ("junit", junit), ("html", html), ("markdown", markdown)):
        if path is not None:
            write_text(path, RENDERERS[fmt](report))
            written.append(Path(path))
    return written
