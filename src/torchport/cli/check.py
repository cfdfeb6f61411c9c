"""``torchport check``: the production-readiness suite (device audit, parity, AMP, data, checkpoints, distributed).

Exit codes: 0 no check failed (warnings allowed); 1 at least one check failed; 2 bad usage
(unknown check name, a target that cannot be imported, a missing reference file).

Examples::

    torchport check                                        # every check, default target, selected device
    torchport check --only audit,amp --json check.json --junit check.xml --html check.html
    torchport check --target my_project.checks:target --skip distributed
    torchport check --only parity --record ref.json        # on platform A (writes ref.json + ref.init.pt + ref.trace.pt)
    torchport check --only parity --reference ref.json     # on platform B
    TORCHPORT_EMULATE=npu torchport check                  # the NPU path, emulated
    torchrun --nproc-per-node 2 -m torchport check --only distributed
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from torchport.cli._options import device_arg, device_option, json_option, warn_deprecated
from torchport.errors import ExitCode

EXIT_FAILED, EXIT_USAGE = int(ExitCode.FAILED), int(ExitCode.USAGE)


def register(app: typer.Typer) -> None:
    """Attach ``check`` to the torchport app."""

    @app.command("check")
    def check(
        target: Optional[str] = typer.Option(None, "--target", "-t", help="User code as package.module:factory "
                                             "returning a torchport.checks.CheckTarget (default: the reference trainer)."),
        only: Optional[List[str]] = typer.Option(None, "--only", help="Run only these checks (repeat or comma-separate): "
                                                 "device-audit/audit, parity, amp, data-determinism/data, checkpoint, "
                                                 "distributed."),
        skip: Optional[List[str]] = typer.Option(None, "--skip", help="Skip these checks."),
        steps: int = typer.Option(100, "--steps", min=1, help="Parity: training steps recorded / replayed."),
        record: Optional[Path] = typer.Option(None, "--record", help="Parity: write a reference trace here (platform A)."),
        reference: Optional[Path] = typer.Option(None, "--reference", help="Parity: replay and compare against this "
                                                 "reference (platform B)."),
        device: str = device_option(),
        json_out: Optional[Path] = json_option("the report (one entry per check)"),
        junit: Optional[Path] = typer.Option(None, "--junit", help="Write a JUnit XML report."),
        html: Optional[Path] = typer.Option(None, "--html", help="Write an HTML report with plots."),
        markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown report."),
        nproc: int = typer.Option(2, "--nproc", min=2, help="Distributed: processes to launch."),
        dist_timeout: float = typer.Option(120.0, "--dist-timeout", help="Distributed: hard limit in seconds."),
        require_accelerator: Optional[bool] = typer.Option(None, "--require-accelerator/--allow-cpu",
                                                           help="Device audit: fail when the job runs on CPU "
                                                           "(default: when an accelerator is present or "
                                                           "TORCHPORT_REQUIRE_ACCELERATOR is set)."),
        expect_accelerator: Optional[bool] = typer.Option(None, "--expect-accelerator", hidden=True),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every piece of evidence, not only problems."),
        list_checks: bool = typer.Option(False, "--list", help="List the checks and exit."),
    ) -> None:
        """Prove readiness: device audit, numerical parity, AMP, data determinism, checkpoints, distributed smoke."""
        from rich.console import Console

        from torchport.checks.runner import CHECKS, CheckOptions, UnknownCheckError, run_checks, select_checks

        con = Console()
        err = Console(stderr=True)
        if expect_accelerator:
            warn_deprecated("check", "--expect-accelerator", "--require-accelerator")
            require_accelerator = True
        if list_checks:
            from torchport.checks.runner import ALIASES

            for spec in CHECKS.values():
                names = ", ".join(sorted(a for a, full in ALIASES.items() if full == spec.name))
                con.print(f"[bold]{spec.name:18}[/] {spec.description}" + (f" [dim](also: {names})[/]" if names else ""),
                          highlight=False)
            return
        if record is not None and reference is not None:
            err.print("[red]torchport check: --record and --reference exclude each other (record on A, replay on B)[/]")
            raise typer.Exit(EXIT_USAGE)
        if reference is not None and not reference.is_file():
            err.print(f"[red]torchport check: --reference {reference}: no such file[/]")
            raise typer.Exit(EXIT_USAGE)
        try:
            names = select_checks(only, skip)
        except UnknownCheckError as exc:
            err.print(f"[red]torchport check: {exc}[/]", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None
        dev = _select(device_arg(device), err)
        tgt = _target(target, err)
        options = CheckOptions(steps=steps, record=str(record) if record else None,
                               reference=str(reference) if reference else None, nproc=nproc,
                               dist_timeout=dist_timeout, expect_accelerator=require_accelerator)
        rank0 = int(os.environ.get("RANK", "0")) == 0
        status = con.status("starting", spinner="dots") if rank0 and con.is_terminal else None

        def on_start(name: str) -> None:
            if status is not None:
                status.update(f"running [bold]{name}[/] ...")

        def on_result(result) -> None:
            if rank0 and not con.is_terminal:  # progress for CI logs, on stderr (stdout may carry --json -)
                err.print(f"{result.name}: {result.status.value} ({result.seconds:.1f}s)", highlight=False)

        if status is not None:
            status.start()
        try:
            report = run_checks(tgt, only=names, options=options, device=dev, on_start=on_start, on_result=on_result)
        finally:
            if status is not None:
                status.stop()
        if rank0:
            from torchport.checks.report import render_terminal, to_json, write_reports

            to_stdout = json_out is not None and str(json_out) == "-"
            if to_stdout:  # machine-readable only: the table goes to stderr
                typer.echo(to_json(report))
            render_terminal(report, err if to_stdout else con, verbose=verbose)
            for p in write_reports(report, json=None if to_stdout else json_out, junit=junit, html=html,
                                   markdown=markdown):
                (err if to_stdout else con).print(f"wrote {p}", highlight=False)
        raise typer.Exit(report.exit_code)


def _select(device: Optional[str], err):
    from torchport.runtime.device import select_device

    from torchport import backends

    try:
        dev = select_device(device, warn=False)
        if backends.get(dev.type) is not dev.backend:
            # probing imported torch, whose backend autoload (TORCHPORT_EMULATE) replaced the record: select again
            dev = select_device(device, warn=False)
        return dev
    except Exception as exc:  # unknown / unavailable backend, malformed env
        err.print(f"[red]torchport check: {exc}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None


def _target(spec: Optional[str], err):
    import sys

    from torchport.checks.target import TargetError, load_target

    if spec and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: targets in the working directory import
    try:
        return load_target(spec)
    except TargetError as exc:
        err.print(f"[red]torchport check: {exc}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
