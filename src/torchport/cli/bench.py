"""`torchport bench`: FP32 vs AMP side by side; `torchport bench compare A.json B.json`.

``torchport bench`` is a command group: run without a sub-command it benchmarks the
model (the seed table); ``compare`` puts two ``--json`` files side by side; ``data``
(the input-pipeline benchmark) is attached when ``torchport.bench.data_bench`` exists.

Exit codes: 0 done; 2 bad settings or unreadable report file.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

import typer


def _attach_data_bench(bench_app: typer.Typer) -> None:
    """Add `bench data` when its module is installed (import errors inside it are real errors)."""
    if importlib.util.find_spec("torchport.bench.data_bench") is None:
        return
    from torchport.bench.data_bench import register_bench_data

    register_bench_data(bench_app)


def register(app: typer.Typer) -> None:
    """Attach this verb (a sub-app) to the torchport app."""
    bench_app = typer.Typer(
        name="bench",
        help="Benchmarks: the model in FP32 vs AMP (default), `compare` two runs, `data` for the input pipeline.",
        invoke_without_command=True,
        no_args_is_help=False,
    )

    @bench_app.callback(invoke_without_command=True)
    def bench(
        ctx: typer.Context,
        preset: Optional[str] = typer.Option(None, help="tiny | small | seed (default seed: resnet50, batch 64, 224)."),
        model: Optional[str] = typer.Option(None, help="torchvision model name or 'tinycnn'."),
        batch: Optional[int] = typer.Option(None, help="Images per step."),
        size: Optional[int] = typer.Option(None, help="Image side in pixels."),
        classes: Optional[int] = typer.Option(None, "--classes", help="Classifier outputs."),
        precision: str = typer.Option("fp32,amp", help="Comma-separated, baseline first: fp32, amp, fp16, bf16, auto."),
        windows: Optional[int] = typer.Option(None, help="Timed windows (median and spread over them)."),
        steps_per_window: Optional[int] = typer.Option(None, help="Training steps per window."),
        warmup: Optional[int] = typer.Option(None, help="Untimed steps per precision."),
        channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="channels_last memory format."),
        data: Optional[str] = typer.Option(None, help="'synthetic' or an ImageFolder directory."),
        workers: Optional[int] = typer.Option(None, help="DataLoader workers for a data directory."),
        device: Optional[str] = typer.Option(None, help="auto | backend | backend:index."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results (per precision, device, settings)."),
        png: Optional[Path] = typer.Option(None, "--png", help="Write a bar chart."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-window progress lines."),
    ) -> None:
        """Train the model for a few timed windows in each precision; print the seed-style table."""
        if ctx.invoked_subcommand is not None:
            return
        from rich.console import Console

        from torchport.backends.registry import UnknownBackendError
        from torchport.backends.spec import BackendUnavailable
        from torchport.runtime.device import ConfigError

        console = Console()
        try:
            from torchport.bench.amp_bench import BenchConfig, run_bench
            from torchport.bench.workload import from_preset

            workload, p = from_preset(preset, model=model, batch=batch, size=size, num_classes=classes,
                                      channels_last=channels_last, data=data, workers=workers)
            cfg = BenchConfig(
                workload=workload,
                precisions=tuple(precision.split(",")),
                windows=windows if windows is not None else p.windows,
                steps_per_window=steps_per_window if steps_per_window is not None else p.steps_per_window,
                warmup=warmup if warmup is not None else p.warmup,
                device=device,
            )
            report = run_bench(cfg, progress=None if quiet else (lambda m: console.print(m, style="dim")))
        except (ConfigError, BackendUnavailable, UnknownBackendError) as exc:
            from torchport.cli._common import fail
            from torchport.errors import ExitCode, exit_code_for

            fail("bench", str(exc), exit_code_for(exc) or ExitCode.USAGE)

        from torchport.bench.report import print_bench, write_json, write_png

        data_dict = report.to_dict()
        print_bench(data_dict, console)
        if json_out:
            write_json(data_dict, str(json_out))
            console.print(f"wrote {json_out}")
        if png:
            write_png(data_dict, str(png))
            console.print(f"wrote {png}")

    @bench_app.command("compare")
    def compare(
        a: Path = typer.Argument(..., help="First report (torchport bench --json), e.g. the GPU run."),
        b: Path = typer.Argument(..., help="Second report, e.g. the Ascend run."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write the comparison."),
    ) -> None:
        """Put two bench runs side by side with B / A ratios."""
        from torchport.bench.report import compare as compare_reports
        from torchport.bench.report import load, print_compare, write_json

        try:
            result = compare_reports(load(str(a)), load(str(b)))
        except ValueError as exc:
            typer.secho(f"torchport bench compare: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        print_compare(result)
        if json_out:
            write_json(result, str(json_out))
            typer.echo(f"wrote {json_out}")

    _attach_data_bench(bench_app)
    app.add_typer(bench_app, name="bench")
