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
        store_url: Optional[str] = typer.Option(None, "--store", help="Also check this s3:// / obs:// URL: endpoint "
                                                "reachable, bucket exists and is listable; exit 1 when not "
                                                "(automatic, without the exit, when an endpoint is configured)."),
    ) -> None:
        """Backends found and chosen, versions, visible devices, shim state, Ascend environment problems; on a
        cluster node, the interface the collectives would use and whether the rendezvous endpoint answers."""
        from rich.markup import escape
        from rich.panel import Panel
        from rich.table import Table

        from torchport.log import console
        from torchport.runtime.doctor import bug_report_block, collect

        report = collect()
        from torchport.cli._common import fail
        from torchport.errors import StorageError
        from torchport.paths import resolve
        from torchport.storage import fs
        from torchport.storage.doctor import store_report

        if store_url is not None and not fs.remote(resolve(store_url, option="--store", remote=True)):
            fail("doctor", f"--store {store_url}: expects an object-store URL "
                           "(s3://bucket/prefix or obs://bucket/prefix)")
        try:
            report["store"] = store_report(store_url)
        except StorageError as exc:  # a malformed --store URL
            fail("doctor", str(exc))
        if report["store"]:
            report["problems"].extend({"backend": "store", **p} for p in report["store"]["problems"])
        from torchport.cluster.doctor import cluster_report

        report["cluster"] = cluster_report()      # None unless a scheduler environment names several nodes
        if report["cluster"]:
            report["problems"].extend({"backend": "cluster", **p} for p in report["cluster"]["problems"])
        from torchport.redact import redact_obj

        report = redact_obj(report)         # an endpoint's user:password, a presigned query: never printed
        write_json(json_out, report)
        if json_out is None or str(json_out) != "-":
            con = console()   # no hard wrap when piped
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
            for b in report["backends"]:
                if b.get("amp_reason"):
                    con.print(f"precision policy ({escape(b['label'])}): auto = [bold]{b['amp_auto']}[/] -- "
                              f"{escape(b['amp_reason'])}", highlight=False)
            con.print(f"shim active: {report['shim_active']}")
            st = report.get("store")
            if st:
                state = ("[green]ok[/]" if not st["problems"] else "[red]problem[/]")
                con.print(f"object store: {state} endpoint {st['endpoint']}, credentials from {st['credentials']}"
                          + (f", {st['url']}" if st["url"] else "") + "".join(f"; {d}" for d in st["detail"]),
                          highlight=False, markup=True)
            cl = report.get("cluster")
            if cl and cl.get("environment"):
                con.print(f"cluster: {cl['environment']}, node {cl['node_rank']} of {cl['nnodes']}; interface "
                          f"{cl['interface'] or '?'} ({cl['address'] or 'no address'}, from {cl['interface_from']}); "
                          f"rendezvous endpoint {cl['endpoint']}: "
                          + ("[green]reachable[/]" if cl["endpoint_reachable"] else "[red]not reachable[/]"),
                          highlight=False)
            for p in report["problems"]:
                con.print(f"[red]problem[/] {escape('[' + p['id'] + ']')} {escape(p['problem'])}\n"
                          f"    [green]fix:[/] {escape(p['fix'])}")
            if not report["problems"]:
                con.print("[green]no problems found[/]")
            con.print(Panel(bug_report_block(report), title="copy into bug reports", expand=con.is_terminal))
        if (strict and report["problems"]) or (store_url and report["store"]["problems"]):
            raise typer.Exit(1)   # --store asks about that URL: a bucket that is not there is a failed check
