"""`torchport doctor`: what torchport sees on this machine, and what is wrong with it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from torchport.cli._options import json_option, write_json


def register(app: typer.Typer) -> None:
    """Attach ``doctor`` to the torchport app."""

    @app.command("doctor")
    def doctor(
        json_out: Optional[Path] = json_option("the report"),
        strict: bool = typer.Option(False, "--strict", help="Exit 1 when any problem is found."),
    ) -> None:
        """Backends found and chosen, versions, visible devices, shim state, Ascend environment problems."""
        from rich.console import Console
        from rich.panel import Panel
        from rich.table import Table

        from torchport.runtime.doctor import bug_report_block, collect

        report = collect()
        write_json(json_out, report)
        if json_out is None or str(json_out) != "-":
            con = Console()
            table = Table(title="torchport backends (auto order: top first)")
            for col in ("backend", "available", "devices", "collectives", "visible-devices env", "amp auto", "pin memory"):
                table.add_column(col)
            for b in report["backends"]:
                env = b["visible_devices_env"] or "-"
                if b["visible_devices"] is not None:
                    env += f"={b['visible_devices']}"
                table.add_row(b["label"], "yes" if b["available"] else "no", str(b["devices"]), b["dist_backend"],
                              env, b["amp_auto"] or "-", "yes" if b["pin_memory"] else "no")
            con.print(table)
            sel = report["selected"]
            con.print(f"selected: [bold]{sel['label']}[/] ({sel['reason']})" if sel else
                      f"[red]selection failed:[/] {report['selection_error']}")
            if sel and not sel["accelerator"]:
                con.print("[yellow]note:[/] no accelerator: jobs run on CPU. Set TORCHPORT_REQUIRE_ACCELERATOR=1 to make that an error.")
            con.print(f"shim active: {report['shim_active']}")
            for p in report["problems"]:
                con.print(f"[red]problem[/] [{p['id']}] {p['problem']}\n    [green]fix:[/] {p['fix']}")
            if not report["problems"]:
                con.print("[green]no problems found[/]")
            con.print(Panel(bug_report_block(report), title="copy into bug reports"))
        if strict and report["problems"]:
            raise typer.Exit(1)
