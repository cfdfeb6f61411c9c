"""``torchport check``: the production-readiness suite (device audit, parity, AMP, data, checkpoints, distributed).

Exit codes: 0 no check failed (warnings allowed); 1 at least one check failed; 2 bad usage
(unknown check name, a target that cannot be imported, a missing reference file).

Examples::

    torchport check                                        # every check, default target, selected device
    torchport check --only audit,amp --json check.json -o check.xml -o check.html
    torchport check --target my_project.checks:target --skip distributed
    torchport check --only parity --record ref.json        # on platform A (writes ref.json + ref.init.pt + ref.trace.pt)
    torchport check --only parity --reference ref.json     # on platform B
    torchport check --only parity --predict npu --steps 50  # the drift band the card's HF32 convolutions explain
    torchport check --only parity --predict npu --reference card.json   # a card run judged against that band
    TORCHPORT_EMULATE=npu torchport check                  # the NPU path, emulated
    torchrun --nproc-per-node 2 -m torchport check --only distributed
    torchport check --only distributed --nnodes 2 --nproc 1   # the smoke across 2 loopback rehearsal nodes
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from torchport.emulate._numerics import CARDS as NUMERICS_CARDS
from torchport.cli._common import fail
from torchport.cli._options import (ReportFile, alias, device_arg, device_option, format_option, json_option,
                                    output_option, parse_reports, warn_deprecated, write_outputs)
from torchport.errors import ExitCode

EXIT_FAILED, EXIT_USAGE = int(ExitCode.FAILED), int(ExitCode.USAGE)

#: What ``check`` shows (``--format``) and writes (``-o``).
FORMATS = ("text", "json", "junit", "markdown", "html")


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
        predict: Optional[str] = typer.Option(None, "--predict", metavar="|".join(c for c in NUMERICS_CARDS if c != "exact"),
                                              help="Parity: train in fp32 and in this card's default numerics "
                                              "(HF32 / TF32 convolutions, on the host) and report the drift band; "
                                              "with --reference, judge the recorded card run against the band."),
        device: str = device_option(),
        json_out: Optional[Path] = json_option("the report (one entry per check)"),
        fmt: Optional[str] = format_option(FORMATS),
        output: Optional[List[str]] = output_option(FORMATS),
        junit: Optional[Path] = alias("--junit"),
        html: Optional[Path] = alias("--html"),
        markdown: Optional[Path] = alias("--markdown"),
        nproc: int = typer.Option(2, "--nproc", min=1, help="Distributed: processes to launch (per node; at least 2 "
                                  "in all)."),
        nnodes: int = typer.Option(1, "--nnodes", min=1, help="Distributed: run the smoke across this many "
                                   "rehearsal nodes on this machine (one torchport launch each; see --net)."),
        net: str = typer.Option("loopback", "--net", metavar="loopback|netns",
                                help="Distributed, --nnodes > 1: the nodes on loopback 127.0.0.x, or each in a Linux "
                                "network namespace of its own (needs root and ip; else loopback, said in one line)."),
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
        from torchport.checks.runner import CHECKS, CheckOptions, UnknownCheckError, run_checks, select_checks

        from torchport.log import console

        con = console()          # no hard wrap when piped
        err = console(stderr=True)
        legacy = []
        for flag, kind, value in (("--junit", "junit", junit), ("--html", "html", html),
                                  ("--markdown", "markdown", markdown)):
            if value is not None:
                warn_deprecated("check", f"{flag} FILE", f"-o {kind}:{value}")
                legacy.append(ReportFile(kind, str(value), prefixed=True))
        # every report option is checked before any work
        shown, outputs, to_stdout = parse_reports("check", fmt, output, FORMATS, json_out, extra=legacy)
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
            fail("check", "--record and --reference exclude each other (record on A, replay on B)", EXIT_USAGE)
        if predict is not None:
            from torchport.emulate._numerics import CARDS

            cards = [c for c in CARDS if c != "exact"]
            if predict not in cards:
                fail("check", f"--predict {predict!r}: expected one of {', '.join(cards)}", EXIT_USAGE)
            if record is not None:
                fail("check", "--predict and --record exclude each other (record the card run plainly, then "
                     "judge it with --predict CARD --reference FILE)", EXIT_USAGE)
        if nproc * nnodes < 2:
            fail("check", f"--nproc {nproc} x --nnodes {nnodes}: the distributed smoke needs at least 2 ranks",
                 EXIT_USAGE)
        if net not in ("loopback", "netns"):
            fail("check", f"--net {net!r}: expected loopback or netns", EXIT_USAGE)
        if reference is not None and not reference.is_file():
            fail("check", f"--reference {reference}: no such file", EXIT_USAGE)
        try:
            names = select_checks(only, skip)
        except UnknownCheckError as exc:
            fail("check", str(exc), EXIT_USAGE)
        dev = _select(device_arg(device), err)
        tgt = _target(target, err)
        options = CheckOptions(steps=steps, record=str(record) if record else None,
                               reference=str(reference) if reference else None, predict=predict, nproc=nproc, nnodes=nnodes, net=net,
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
        written = True
        if rank0:
            from torchport.checks.report import RENDERERS, render_terminal, to_json

            if json_out is not None and str(json_out) == "-":
                typer.echo(to_json(report))
            elif json_out is not None:
                outputs.insert(0, ReportFile("json", str(json_out)))
            term = err if to_stdout else con   # stdout carries a machine-readable report: the rest goes to stderr
            if shown == "text":
                render_terminal(report, term, verbose=verbose)
            else:
                text = RENDERERS[shown](report)
                term.file.write(text if text.endswith("\n") else text + "\n")
                term = err
            written = write_outputs("check", outputs, lambda f: RENDERERS[f](report),
                                    announce=lambda line: term.print(line, highlight=False, soft_wrap=True))
        raise typer.Exit(report.exit_code if written else int(ExitCode.IO))


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
        from torchport.cli._common import missing_extra

        if missing_extra(exc):
            raise        # the guard says which extra to install
        fail("check", str(exc), EXIT_USAGE)


def _target(spec: Optional[str], err):
    import sys

    from torchport.checks.target import TargetError, load_target

    if spec and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: targets in the working directory import
    try:
        return load_target(spec)
    except TargetError as exc:
        fail("check", str(exc), EXIT_USAGE)
