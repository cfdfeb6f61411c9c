"""Renderers for a :class:`~torchport.profile.profiler.ProfileResult`: rich table, JSON, PNG.

Example::

    from torchport.profile.report import print_profile, write_json, write_png
    print_profile(result)                    # table + verdict + advice + warning
    write_json(result, "profile.json")       # per-phase seconds and fractions, dominant phase
    write_png(result, "profile.png")         # stacked bar per step + the mean
"""

from __future__ import annotations

import os
from typing import Any

from torchport.profile.analysis import PHASES
from torchport.profile.profiler import ProfileResult

__all__ = ["print_profile", "write_json", "write_png", "PHASE_COLORS"]

PHASE_COLORS = {"data": "#4c72b0", "copy": "#8172b3", "forward": "#dd8452", "backward": "#c44e52",
                "optimizer": "#55a868", "other": "#8c8c8c"}


def print_profile(result: ProfileResult, console: Any = None) -> None:
    """Print the phase table, the dominant term with its decision, and the cross-platform warning."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    a = result.analysis
    title = (f"Step profile: {result.device} ({result.backend}), {len(result.steps)} steps "
             f"(warm-up {result.warmup_steps} excluded), precision {result.precision or '?'}")
    table = Table(title=escape(title), title_justify="left")
    table.add_column("phase")
    table.add_column("ms / step", justify="right")
    table.add_column("share", justify="right")
    table.add_column("")
    for name, sec in result.phase_s.items():
        frac = result.fractions[name]
        style = "bold" if name == a.dominant_phase else ""
        table.add_row(name, f"{sec * 1e3:.2f}", f"{frac * 100:.1f}%", "#" * round(frac * 40), style=style)
    table.add_row("step", f"{result.step_s * 1e3:.2f}", "100.0%", "", style="dim")
    console.print(table)
    if result.description:
        console.print(f"workload: {escape(result.description)}")
    if result.settings.get("compile_s") is not None:
        from torchport.runtime.step import compile_line

        console.print(compile_line(result.settings["compile_s"], result.settings.get("compile_backend")),
                      markup=False, highlight=False)
    console.print(f"[bold]dominant term: {a.dominant} ({a.dominant_phase}) -> {a.verdict}[/bold] "
                  f"({a.fraction * 100:.0f}% of the step)")
    for tip in a.advice:
        console.print(f"  - {escape(tip)}")
    sync = result.sync_overhead_s
    if not result.is_accelerator:
        line = "profiler cost: none to speak of on cpu (synchronize is a no-op; phases are host wall time)"
        if result.unprofiled_step_s:
            line += (f"; free-running step {result.unprofiled_step_s * 1e3:.2f} ms vs profiled "
                     f"{result.step_median_s * 1e3:.2f} ms (median)")
        console.print(escape(line), style="dim")
    elif sync is not None:
        line = (f"profiler cost: {result.sync_calls_per_step:.0f} device syncs per step, "
                f"~{sync * 1e6:.0f} us per step on the idle device")
        if result.unprofiled_step_s:
            line += (f"; free-running step {result.unprofiled_step_s * 1e3:.2f} ms vs profiled "
                     f"{result.step_median_s * 1e3:.2f} ms (median)")
        console.print(escape(line), style="dim")
    console.print(f"[yellow]torchport: warning: [/yellow]{escape(a.warning)}")


def write_json(result: ProfileResult, path: str) -> None:
    """Write ``result.to_dict()`` to ``path`` (folders created; ``-`` = stdout)."""
    from torchport._json import write_json as write

    write(path, result.to_dict())


def write_png(result: ProfileResult, path: str) -> None:
    """Stacked bar chart: one bar per timed step and one for the mean, phases stacked in step order."""
    from matplotlib.figure import Figure

    names = list(result.phase_s)
    labels = [str(s.index) for s in result.steps] + ["mean"]
    rows = [[s.phases.get(n, 0.0) * 1e3 for s in result.steps] + [result.phase_s[n] * 1e3] for n in names]
    fig = Figure(figsize=(max(6.0, 0.35 * len(labels) + 3), 4.2))  # no pyplot: no global backend state
    ax = fig.subplots()
    bottom = [0.0] * len(labels)
    for name, vals in zip(names, rows):
        ax.bar(labels, vals, bottom=bottom, label=name, color=PHASE_COLORS.get(name), edgecolor="white", linewidth=0.5)
        bottom = [b + v for b, v in zip(bottom, vals)]
    a = result.analysis
    ax.set_ylabel("ms")
    ax.set_xlabel("step")
    ax.set_title(f"{result.device} ({result.backend}): {a.verdict}, {a.dominant_phase} "
                 f"{result.fractions.get(a.dominant_phase, 0) * 100:.0f}%", fontsize=10)
    order = [n for n in PHASES if n in names] + [n for n in names if n not in PHASES]
    handles, labs = ax.get_legend_handles_labels()
    pairs = dict(zip(labs, handles))
    ax.legend([pairs[n] for n in reversed(order)], list(reversed(order)), loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
