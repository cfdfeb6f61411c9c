"""HTML report: one self-contained page (inline CSS, plots as base64 PNGs, no scripts).

Plots come from each result's ``series``: ``loss A`` / ``loss B`` (parity) are drawn as an
overlay with the absolute difference on a second axis; ``loss scale`` (AMP) as a step
timeline on a log axis; any other series as a plain line plot. matplotlib's ``Figure`` is used
directly (no pyplot): nothing global changes and no window opens.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from torchport.checks.result import Report

__all__ = ["to_html", "plot_png"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}
th{background:#f3f3f3;text-align:left}.pass{color:#1a7f37;font-weight:bold}.warn{color:#9a6700;font-weight:bold}
.fail{color:#cf222e;font-weight:bold}.skip{color:#777}.where{font-family:monospace;font-size:90%}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
table.evidence{table-layout:fixed;width:100%}td{overflow-wrap:anywhere;word-break:break-word}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;font-size:85%}summary{cursor:pointer}
"""

#: Text longer than this (or over several lines) is folded into a <details> element.
FOLD_CHARS = 240


def _figure(title: str, series: dict[str, list[float]]):
    from matplotlib.figure import Figure  # no pyplot: no global backend, no window; savefig renders with Agg

    fig = Figure(figsize=(7.5, 3.2), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    if "loss A" in series and "loss B" in series:
        a, b = series["loss A"], series["loss B"]
        ax.plot(range(len(a)), a, label="A (reference)", linewidth=1.6)
        ax.plot(range(len(b)), b, label="B (this run)", linewidth=1.0, linestyle="--")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        n = min(len(a), len(b))
        if n:
            ax2 = ax.twinx()
            ax2.plot(range(n), [abs(x - y) for x, y in zip(a[:n], b[:n])], color="tab:red", alpha=0.4, linewidth=0.8,
                     label="|A - B|")
            ax2.set_ylabel("|A - B|", color="tab:red")
            ax2.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize=8)
    elif "loss scale" in series:
        s = series["loss scale"]
        xs = list(range(1, len(s) + 1))
        ax.step([0] + xs, [s[0]] + s if s else [], where="pre", label="loss scale after the step")
        skipped = series.get("skipped", [])
        marks = [(x, v) for x, v, k in zip(xs, s, skipped) if k]
        if marks:
            ax.plot([m[0] for m in marks], [m[1] for m in marks], "x", color="tab:red", markersize=9,
                    label="overflow: step skipped")
        if s and min(s) > 0:
            ax.set_yscale("log", base=2)
        ax.set_xticks(range(0, len(s) + 1))
        ax.set_xlabel("step of the AMP check")
        ax.set_ylabel("loss scale")
        ax.legend(fontsize=8)
    else:
        for name, values in series.items():
            ax.plot(range(len(values)), values, label=name)
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_png(title: str, series: dict[str, list[float]]) -> bytes:
    """PNG bytes of the plot for one result's ``series``."""
    fig = _figure(title, series)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _e(x: Any) -> str:
    if isinstance(x, float):
        x = f"{x:.4g}"
    return html.escape("" if x is None else str(x))


def _cell(x: Any) -> str:
    """A table cell's text: short text as is; long or multi-line text (tracebacks, op lists) folded
    under its first line, wrapping instead of running off the page."""
    text = "" if x is None else (f"{x:.4g}" if isinstance(x, float) else str(x))
    if len(text) <= FOLD_CHARS and "\n" not in text:
        return html.escape(text)
    first = text.strip().splitlines()[0] if text.strip() else ""
    head = first if len(first) <= 120 else first[:117] + "..."
    return f"<details><summary>{html.escape(head)}</summary><pre>{html.escape(text)}</pre></details>"


def to_html(report: Report) -> str:
    """The report as one HTML page with embedded plots."""
    meta = report.meta
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>torchport check: {_e(report.status.value)}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>torchport check: <span class='{report.status.value}'>{_e(report.status.value.upper())}</span></h1>",
             f"<p>Target <code>{_e(meta.get('target'))}</code> on <code>{_e(meta.get('device'))}</code>, "
             f"torch {_e(meta.get('torch'))}, {_e(meta.get('seconds'))} s</p>",
             "<table><tr><th>check</th><th>status</th><th>time</th><th>summary</th></tr>"]
    for r in report.results:
        parts.append(f"<tr><td><a href='#{_e(r.name)}'>{_e(r.name)}</a></td><td class='{r.status.value}'>"
                     f"{_e(r.status.value)}</td><td>{r.seconds:.1f}s</td><td>{_e(r.summary)}</td></tr>")
    parts.append("</table>")
    for r in report.results:
        parts.append(f"<h2 id='{_e(r.name)}'>{_e(r.name)} <span class='{r.status.value}'>{_e(r.status.value)}</span></h2>"
                     f"<p>{_e(r.summary)}</p>")
        series = {k: [float(v) for v in vals] for k, vals in r.series.items() if vals}
        if series:
            title = {"parity": "loss overlay: A (reference) vs B", "amp": "loss-scale timeline"}.get(r.name, r.name)
            png = base64.b64encode(plot_png(title, series)).decode("ascii")
            parts.append(f"<img alt='{_e(title)}' data-series='{_e(','.join(series))}' "
                         f"src='data:image/png;base64,{png}'>")
        parts.append("<table class='evidence'><tr><th style='width:6%'>status</th><th style='width:18%'>what</th>"
                     "<th style='width:14%'>measured</th><th style='width:12%'>threshold</th>"
                     "<th style='width:20%'>where</th><th>detail</th></tr>")
        for e in r.evidence:
            parts.append(f"<tr><td class='{e.status.value}'>{_e(e.status.value)}</td><td>{_cell(e.what)}</td>"
                         f"<td>{_cell(e.measured)}</td><td>{_cell(e.threshold)}</td><td class='where'>{_cell(e.where)}</td>"
                         f"<td>{_cell(e.detail)}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
