"""Renderers for bench runs: the seed-style table, JSON, PNG, and ``compare`` of two JSON files.

The table mirrors the issue's seed reference (Ascend 910B3, ResNet-50, batch 64, 224x224)::

                     FP32          AMP (fp16)     change
    throughput       545 img/s     1254 img/s     +130% (2.30x)
    peak memory      5651 MiB      2924 MiB       -48%
    time per batch   117.4 ms      50.6 ms        -57%

Everything works on the JSON dict (``BenchReport.to_dict()`` or a loaded file), so
``compare`` can put a workstation GPU run next to an Ascend run.

Example::

    from torchport.bench.report import load, compare, print_compare
    print_compare(compare(load("workstation.json"), load("ascend.json")))
"""

from __future__ import annotations

import os
from typing import Any, Mapping

__all__ = ["load", "write_json", "rows", "print_bench", "write_png", "compare", "print_compare", "fmt_change"]

_MIB = float(2 ** 20)


def load(path: str) -> dict[str, Any]:
    """Read a ``torchport bench --json`` file, checking it is one.

    Raises:
        ValueError: not JSON or not a torchport bench report (the message names the file).
    """
    from torchport._parse import loads

    try:
        with open(path, "rb") as fh:
            data = loads(fh.read(), fmt="json", what=path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read a bench report ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) or not data["results"]:
        raise ValueError(f"{path}: not a torchport bench report (no 'results'); write one with `torchport bench --json`")
    for label, res in data["results"].items():
        missing = [k for k in ("images_per_s", "ms_per_batch", "peak_memory_bytes") if k not in res]
        if missing:
            raise ValueError(f"{path}: result {label!r} lacks {', '.join(missing)}")
    return data


def write_json(report: Mapping[str, Any], path: str) -> None:
    """Write a report dict (``BenchReport.to_dict()``) to ``path`` (folders created; ``-`` = stdout)."""
    from torchport._json import write_json as write

    write(path, dict(report))


def fmt_change(new: float | None, old: float | None, *, ratio: bool = False) -> str:
    """``+130% (2.30x)`` / ``-48%``; ``n/a`` when either side is unknown."""
    if new is None or old is None or old == 0:
        return "n/a"
    change = new / old - 1.0
    text = f"{change * 100:+.0f}%"
    return f"{text} ({new / old:.2f}x)" if ratio else text


def _mem(b: int | None) -> str:
    return "n/a" if b is None else f"{b / _MIB:.0f} MiB"


def _head(label: str, res: Mapping[str, Any]) -> str:
    prec = res.get("precision", label)
    return label.upper() if prec == label else f"{label.upper()} ({prec})"


def rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The seed table as text: ``(header, rows)``; the change column compares the 2nd result to the 1st."""
    labels = list(report["results"])
    res = [report["results"][k] for k in labels]
    header = [""] + [_head(k, r) for k, r in zip(labels, res)]
    table = [
        ["throughput"] + [f"{r['images_per_s']:.0f} img/s" if r["images_per_s"] >= 100 else f"{r['images_per_s']:.1f} img/s"
                          for r in res],
        ["peak memory"] + [_mem(r["peak_memory_bytes"]) for r in res],
        ["time per batch"] + [f"{r['ms_per_batch']:.1f} ms" for r in res],
        ["spread (windows)"] + [f"+/-{r.get('spread_pct', 0.0) / 2:.1f}%" for r in res],
    ]
    if len(res) >= 2:
        header.append("change")
        a, b = res[0], res[1]
        table[0].append(fmt_change(b["images_per_s"], a["images_per_s"], ratio=True))
        table[1].append(fmt_change(b["peak_memory_bytes"], a["peak_memory_bytes"]))
        table[2].append(fmt_change(b["ms_per_batch"], a["ms_per_batch"]))
        table[3].append("")
    return header, table


def print_bench(report: Mapping[str, Any], console: Any = None) -> None:
    """Print the seed-style table for a report dict, with a line saying where and how it ran."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    s = report.get("settings", {})
    title = (f"{s.get('description', '')} on {report['device']} [{report.get('device_name', '')}], "
             f"torch {report.get('torch', '?')}")
    table = Table(title=escape(title), title_justify="left")
    header, body = rows(report)
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right")
    for r in body:
        table.add_row(*r, style="dim" if r[0].startswith("spread") else "")
    console.print(table)
    console.print(f"median of {s.get('windows', '?')} windows x {s.get('steps_per_window', '?')} steps, "
                  f"{s.get('warmup', '?')} warm-up steps excluded; spread = half the (slowest - fastest) window range",
                  style="dim")
    for label, res in report["results"].items():
        if res.get("compile_s") is not None:
            from torchport.runtime.step import compile_line

            console.print(f"{label}: " + compile_line(res["compile_s"], res.get("compile_backend")),
                          highlight=False, markup=False)
    pol = report.get("precision_policy") or {}
    if pol.get("auto"):
        console.print(f"precision policy: auto = {pol['auto']} on {report['device']}"
                      + (f" -- {pol['reason']}" if pol.get("reason") else ""), highlight=False, markup=False)
    if all(r["peak_memory_bytes"] is None for r in report["results"].values()):
        console.print("peak device memory: n/a on cpu (no device allocator; host RSS is not per-precision)", style="dim")


def write_png(report: Mapping[str, Any], path: str) -> None:
    """Bar charts: throughput (with the window range), time per batch and peak memory per precision."""
    from matplotlib.figure import Figure

    labels = list(report["results"])
    res = [report["results"][k] for k in labels]
    names = [_head(k, r) for k, r in zip(labels, res)]
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 3)
    ips = [r["images_per_s"] for r in res]
    lo = [v - r.get("images_per_s_min", v) for v, r in zip(ips, res)]
    hi = [r.get("images_per_s_max", v) - v for v, r in zip(ips, res)]
    axes[0].bar(names, ips, yerr=[lo, hi], capsize=4, color=colors[:len(res)])
    axes[0].set_title("throughput (img/s)")
    axes[1].bar(names, [r["ms_per_batch"] for r in res], color=colors[:len(res)])
    axes[1].set_title("time per batch (ms)")
    mem = [r["peak_memory_bytes"] for r in res]
    if any(m is not None for m in mem):
        axes[2].bar(names, [(m or 0) / _MIB for m in mem], color=colors[:len(res)])
        axes[2].set_title("peak device memory (MiB)")
    else:
        axes[2].text(0.5, 0.5, "peak device memory:\nn/a on cpu", ha="center", va="center")
        axes[2].set_axis_off()
    fig.suptitle(f"{report.get('settings', {}).get('description', '')} on {report['device']}", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)


def _ratio(b: float | None, a: float | None) -> float | None:
    return None if a in (None, 0) or b is None else b / a


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Put two bench reports side by side: per shared precision, B / A for every metric.

    Returns:
        ``{"a": {...}, "b": {...}, "rows": [{"precision", "metric", "a", "b", "ratio"}], "settings_differ": [...],
        "amp_speedup": {"a", "b"}}``; ``ratio`` > 1 means B has more of it (for ms and memory, more is worse).
    """
    shared = [k for k in a["results"] if k in b["results"]]
    out_rows = []
    for label in shared:
        ra, rb = a["results"][label], b["results"][label]
        for metric in ("images_per_s", "ms_per_batch", "peak_memory_bytes"):
            out_rows.append({"precision": label, "metric": metric, "a": ra.get(metric), "b": rb.get(metric),
                             "ratio": _ratio(rb.get(metric), ra.get(metric))})
    sa, sb = a.get("settings", {}), b.get("settings", {})
    differ = sorted(k for k in ("model", "batch", "size", "channels_last", "data", "num_classes")
                    if sa.get(k) != sb.get(k))

    def speedup(rep: Mapping[str, Any]) -> float | None:
        comp = rep.get("comparison") or {}
        return comp.get("speedup")

    return {
        "schema": "torchport.bench.compare/1",
        "a": {"device": a.get("device"), "backend": a.get("backend"), "device_name": a.get("device_name"),
              "host": a.get("host"), "torch": a.get("torch")},
        "b": {"device": b.get("device"), "backend": b.get("backend"), "device_name": b.get("device_name"),
              "host": b.get("host"), "torch": b.get("torch")},
        "rows": out_rows,
        "only_in_a": [k for k in a["results"] if k not in b["results"]],
        "only_in_b": [k for k in b["results"] if k not in a["results"]],
        "settings_differ": differ,
        "amp_speedup": {"a": speedup(a), "b": speedup(b)},
    }


def print_compare(cmp: Mapping[str, Any], console: Any = None) -> None:
    """Print a :func:`compare` result as a table (B / A ratios)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()

    def who(side: Mapping[str, Any]) -> str:
        return f"{side.get('device')} [{side.get('device_name') or side.get('backend')}]"

    table = Table(title=escape(f"A = {who(cmp['a'])}   B = {who(cmp['b'])}"), title_justify="left")
    for col, just in (("precision", "left"), ("metric", "left"), ("A", "right"), ("B", "right"), ("B / A", "right")):
        table.add_column(col, justify=just)
    units = {"images_per_s": ("img/s", 1.0, "{:.1f}"), "ms_per_batch": ("ms", 1.0, "{:.1f}"),
             "peak_memory_bytes": ("MiB", _MIB, "{:.0f}")}
    for r in cmp["rows"]:
        unit, div, fmt = units[r["metric"]]
        cell = [("n/a" if v is None else f"{fmt.format(v / div)} {unit}") for v in (r["a"], r["b"])]
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        table.add_row(r["precision"], r["metric"].replace("_", " "), *cell, ratio)
    console.print(table)
    sp = cmp["amp_speedup"]
    if sp.get("a") is not None or sp.get("b") is not None:
        fa = "n/a" if sp.get("a") is None else f"{sp['a']:.2f}x"
        fb = "n/a" if sp.get("b") is None else f"{sp['b']:.2f}x"
        console.print(f"AMP speedup within each run: A {fa}, B {fb}")
    if cmp["settings_differ"]:
        console.print(f"[yellow]torchport: warning: [/yellow]the runs differ in {', '.join(cmp['settings_differ'])}: "
                      "ratios compare different workloads")
    for side in ("a", "b"):
        only = cmp[f"only_in_{side}"]
        if only:
            console.print(f"only in {side.upper()}: {', '.join(only)}", style="dim")
