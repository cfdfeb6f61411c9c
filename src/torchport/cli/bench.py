"""`torchport bench`: FP32 vs AMP side by side; `torchport bench compare A.json B.json`.

``torchport bench`` is a command group: run without a sub-command it benchmarks the
model (the seed table); ``compare`` puts two ``--json`` files side by side; ``data`` is the old,
hidden spelling of ``torchport data bench`` (the input-pipeline benchmark), kept as a deprecated alias.

Exit codes: 0 done; 2 bad settings or unreadable report file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from torchport.cli._common import ExitCode, fail
from torchport.cli._options import (MARKUP, alias, device_arg, device_option, json_option, parse_precision,
                                    precision_option, preset_arg, renamed, require_accelerator_option,
                                    write_json)


def register(app: typer.Typer) -> None:
    """Attach this verb (a sub-app) to the torchport app."""
    bench_app = typer.Typer(
        name="bench",
        help="Benchmarks: the model in FP32 vs AMP (default); `compare` two runs. The input-pipeline benchmark is "
             "`torchport data bench`.",
        invoke_without_command=True,
        no_args_is_help=False,
        rich_markup_mode=MARKUP,
    )

    @bench_app.callback(invoke_without_command=True)
    def bench(
        ctx: typer.Context,
        preset: Optional[str] = typer.Option(None, metavar="PRESET", help="tiny | small | resnet50-224 (default "
                                             "resnet50-224: ResNet-50, batch 64, 224x224; 'seed' is its old name)."),
        model: Optional[str] = typer.Option(None, help="torchvision model name or 'tinycnn'."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Images per step."),
        image_size: Optional[int] = typer.Option(None, "--image-size", help="Image side in pixels."),
        num_classes: Optional[int] = typer.Option(None, "--num-classes", help="Classifier outputs."),
        precision: str = precision_option("fp32,amp", many=True, help="Baseline first."),
        windows: Optional[int] = typer.Option(None, help="Timed windows (median and spread over them)."),
        steps_per_window: Optional[int] = typer.Option(None, help="Training steps per window."),
        warmup: Optional[int] = typer.Option(None, help="Untimed steps per precision."),
        channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="channels_last memory format."),
        data: Optional[str] = typer.Option(None, help="'synthetic' or an ImageFolder directory."),
        workers: Optional[int] = typer.Option(None, help="DataLoader workers for a data directory."),
        device: str = device_option(),
        require_accelerator: Optional[bool] = require_accelerator_option(),
        json_out: Optional[Path] = json_option("the results (per precision, device, settings)"),
        png: Optional[Path] = typer.Option(None, "--png", metavar="FILE", help="Write a bar chart."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-window progress lines."),
        compile_model: bool = typer.Option(False, "--compile", help="torch.compile the model with the backend's "
                                           "compiler; the first (compiling) step is warm-up, reported as 'compile: X s'."),
        batch: Optional[int] = alias("--batch"),
        size: Optional[int] = alias("--size"),
        classes: Optional[int] = alias("--classes"),
    ) -> None:
        """Train the model for a few timed windows in each precision; print the seed-style table."""
        if ctx.invoked_subcommand is not None:
            return
        from torchport.backends.registry import UnknownBackendError
        from torchport.backends.spec import BackendUnavailable
        from torchport.log import console as make_console
        from torchport.errors import ConfigError
        from torchport.runtime.device import NoAcceleratorError

        batch_size = renamed("bench", "--batch-size", batch_size, "--batch", batch)
        image_size = renamed("bench", "--image-size", image_size, "--size", size)
        num_classes = renamed("bench", "--num-classes", num_classes, "--classes", classes)
        precisions = parse_precision("bench", precision, many=True)
        preset = preset_arg("bench", preset)
        console = make_console(stderr=json_out is not None and str(json_out) == "-")
        try:
            from torchport.paths import check

            if data != "synthetic":
                check(data, option="--data")      # an ImageFolder on this machine (a URL: one line, before any work)
            check(png, option="--png")            # (--json is checked as the command line is parsed)
            from torchport.bench.amp_bench import BenchConfig, run_bench
            from torchport.workload import from_preset

            workload, p = from_preset(preset, model=model, batch=batch_size, size=image_size, num_classes=num_classes,
                                      channels_last=channels_last, data=data, workers=workers)
            cfg = BenchConfig(
                workload=workload,
                precisions=precisions,
                windows=windows if windows is not None else p.windows,
                steps_per_window=steps_per_window if steps_per_window is not None else p.steps_per_window,
                warmup=warmup if warmup is not None else p.warmup,
                device=device_arg(device),
                require_accelerator=require_accelerator,
                compile=compile_model,
            )
            report = run_bench(cfg, progress=None if quiet else (lambda m: console.print(m, style="dim")))
        except (ConfigError, BackendUnavailable, UnknownBackendError) as exc:
            from torchport.errors import exit_code_for

            fail("bench", str(exc), exit_code_for(exc) or ExitCode.USAGE)
        except NoAcceleratorError as exc:
            fail("bench", str(exc), ExitCode.NO_ACCELERATOR)

        from torchport.bench.report import print_bench, write_png

        data_dict = report.to_dict()
        print_bench(data_dict, console)
        if write_json(json_out, data_dict):
            console.print(f"wrote {json_out}")
        if png:
            write_png(data_dict, str(png))
            console.print(f"wrote {png}")

    @bench_app.command("compare")
    def compare(
        a: Path = typer.Argument(..., help="First report (torchport bench --json), e.g. the GPU run."),
        b: Path = typer.Argument(..., help="Second report, e.g. the Ascend run."),
        json_out: Optional[Path] = json_option("the comparison"),
    ) -> None:
        """Put two bench runs side by side with B / A ratios."""
        from torchport.bench.report import compare as compare_reports
        from torchport.bench.report import load, print_compare

        try:
            result = compare_reports(load(str(a)), load(str(b)))
        except ValueError as exc:
            fail("bench compare", str(exc))
        to_stdout = json_out is not None and str(json_out) == "-"
        if not to_stdout:
            print_compare(result)
        if write_json(json_out, result):
            typer.echo(f"wrote {json_out}")

    @bench_app.command("memory")
    def memory(
        model: str = typer.Option("resnet18", help="torchvision model name or 'tinycnn'."),
        nproc: str = typer.Option("1,2,4", "--nproc", metavar="N[,N...]", help="Process counts to launch (torchrun)."),
        batch_size: int = typer.Option(8, "--batch-size", help="Images per step per process."),
        image_size: int = typer.Option(64, "--image-size", help="Image side in pixels."),
        num_classes: int = typer.Option(100, "--num-classes", help="Classifier outputs."),
        device: str = device_option(),
        json_out: Optional[Path] = json_option("the rows (strategy, ranks, MiB per rank)"),
    ) -> None:
        """Memory per rank, DDP vs FSDP on the same model: parameters + optimizer state (FSDP: ~1/N) and peaks."""
        from rich.console import Console

        from torchport.bench.memory import print_memory_table, run_memory_bench

        try:
            counts = tuple(int(v) for v in nproc.split(","))
        except ValueError:
            counts = ()
        if not counts or min(counts) < 1:
            fail("bench memory", f"--nproc {nproc!r}: give process counts such as 1,2,4")
        try:
            rows = run_memory_bench(model, nprocs=counts, device=device_arg(device) or "auto", batch_size=batch_size,
                                    image_size=image_size, num_classes=num_classes)
        except RuntimeError as exc:
            fail("bench memory", str(exc).splitlines()[0], ExitCode.FAILED)
        to_stdout = json_out is not None and str(json_out) == "-"
        print_memory_table(rows, Console(stderr=to_stdout))
        if write_json(json_out, rows) and not to_stdout:
            typer.echo(f"wrote {json_out}")

    from torchport.cli.data_bench import register_bench_data

    register_bench_data(bench_app, "data", deprecated_as="bench data")   # home: `torchport data bench`
    app.add_typer(bench_app, name="bench")
