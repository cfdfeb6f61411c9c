"""`torchport run`: run an unmodified CUDA-only script on whatever backend is present.

Examples::

    torchport run train.py --epochs 1                 # report printed at exit
    torchport run -m mypkg.train --lr 0.1
    torchport run --json redirects.json train.py
    torchport run --format none -o redirects.txt train.py   # no report on stderr, a text file
    torchport run --require-accelerator train.py      # exit 7 instead of a CPU run
    torchrun --nproc-per-node 2 -m torchport run train.py --ddp

Options go *before* the script; everything after the script (or module) name is passed
to it unchanged, including options torchport also has (``--device``).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from torchport.emulate._numerics import CARDS as NUMERICS_CARDS, CLI_HELP as NUMERICS_HELP
from torchport.cli._options import (alias, device_arg, device_option, format_option, output_option, parse_reports,
                                    renamed, warn_deprecated)

#: What ``run`` shows on stderr (``--format``; ``none`` = nothing) and writes (``-o``: text, json).
FORMATS = ("text", "json", "none")


def register(app: typer.Typer) -> None:
    """Attach ``run`` to the torchport app."""

    @app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    def run(
        ctx: typer.Context,
        target: str = typer.Argument(..., metavar="SCRIPT|MODULE", help="Script to run (or module name with -m)."),
        module: bool = typer.Option(False, "-m", "--module", help="TARGET is a module name, run like `python -m`."),
        device: str = device_option(),
        require_accelerator: Optional[bool] = typer.Option(
            None, "--require-accelerator/--allow-cpu",
            help="Fail (exit 7) instead of running on CPU when no accelerator is found "
                 "(default TORCHPORT_REQUIRE_ACCELERATOR)."),
        fmt: Optional[str] = format_option(FORMATS, where="on stderr at exit (stdout belongs to the script)"),
        output: Optional[List[str]] = output_option(FORMATS),
        report: Optional[str] = alias("--report"),
        json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Write the redirect report as JSON "
                                                "to FILE ('-' for stdout, after the script's output; ranks > 0 add "
                                                ".rankN before the suffix)."),
        report_file: Optional[Path] = alias("--report-file"),
        numerics: str = typer.Option(
            "exact", "--numerics", metavar="|".join(NUMERICS_CARDS),
            help=f"Compute float32 conv/matmul in a card's default numerics: {NUMERICS_HELP}; no GPU needed."),
        hazards: Optional[str] = typer.Option(
            None, "--hazards", metavar="FILE",
            help="Write the performance-hazard report (host syncs, CPU-fallback operators, new shapes, float64/int64 "
                 "work, by your line) to FILE when the script ends: .json, .html or text by suffix; '-' = text on stderr."),
        user_path: Optional[List[str]] = typer.Option(
            None, "--user-path", help="File or directory counted as your code for the caller-aware CUDA availability answer "
                                      "(repeatable; needed only for your own packages installed into site-packages)."),
    ) -> None:
        """Run SCRIPT (or -m MODULE) with CUDA calls redirected to the selected device; print what was redirected.

        Exit codes: the script's own; 2 bad arguments (script/module not found, unknown or unavailable
        device, a foreign CUDA shim such as transfer_to_npu already active); 7 no accelerator with
        --require-accelerator.
        """
        from torchport.shim.runner import RunConfig
        from torchport.shim.runner import run as run_target

        json_out = renamed("run", "--json", json_out, "--report-file", report_file)
        if report is not None and report.strip().lower() == "json":   # the old way to ask for JSON
            warn_deprecated("run", "--report json", "--json FILE")
            fmt = fmt or ("none" if json_out is not None else "json")   # the file alone, else JSON on stderr
        elif report is not None:
            fmt = renamed("run", "--format", fmt, "--report", report)
        shown, outputs, _ = parse_reports("run", fmt, output, FORMATS, json_out)   # before the script starts
        report_file = json_out
        config = RunConfig(
            target=target,
            args=list(ctx.args),
            module=module,
            device=device_arg(device),
            require_accelerator=require_accelerator,
            report=shown,
            report_file=str(report_file) if report_file is not None else None,
            outputs=outputs,
            user_paths=list(user_path or ()),
            numerics=numerics,
            hazards=hazards,
        )
        code = run_target(config)
        raise typer.Exit(code)
