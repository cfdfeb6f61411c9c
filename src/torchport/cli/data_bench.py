"""``torchport data bench``: the typer command over :mod:`torchport.data.bench` (the benchmark itself lives
there, the command here: every command lives in ``cli/``); ``--data s3://...`` runs the object-store comparison
(:mod:`torchport.cli._store_bench`)."""

from __future__ import annotations

from pathlib import Path

from torchport.data.bench import (BASELINES, MODES, BenchConfig, missing_photo_source, render_png, render_table,
                                  run_bench)

__all__ = ["register_bench_data"]


def register_bench_data(bench_app, name: str = "data", *, deprecated_as: str | None = None) -> None:
    """Add this benchmark as sub-command ``name`` of a typer app (``torchport data bench``; the old spelling
    ``torchport data bench`` is registered hidden with ``deprecated_as``, and warns)."""
    import typer

    from torchport.cli._options import alias, device_arg, device_option, json_option, renamed, warn_deprecated, write_json

    @bench_app.command(name, hidden=deprecated_as is not None)
    def bench_data(
        count: int = typer.Option(1024, help="photos in the generated benchmark set"),
        root: str = typer.Option(None, help="use this ImageFolder of JPEGs instead of the generated set"),
        workers: int = typer.Option(2, help="DataLoader workers (and DALI threads), the same for every pipeline"),
        batch_size: int = typer.Option(64, "--batch-size"),
        image_size: int = typer.Option(224, "--image-size", help="output image side"),
        seconds: float = typer.Option(4.0, help="measuring time per pipeline per round"),
        rounds: int = typer.Option(3, help="interleaved rounds; the median is reported"),
        modes: str = typer.Option(",".join(MODES), help="comma-separated torchport modes"),
        baselines: str = typer.Option(",".join(BASELINES), "--baselines",
                                      help="comma-separated: pil (always run), dali, torchvision-io; a missing package is skipped with a note"),
        train_step: bool = typer.Option(True, "--train-step/--no-train-step", help="also time training steps"),
        profile: bool = typer.Option(True, "--profile/--no-profile", help="also profile a JPEG worker stage by stage"),
        device: str = device_option(),
        json_out: Path = json_option("the result"),
        png: Path = typer.Option(None, help="write a bar chart PNG"),
        check: bool = typer.Option(False, help="exit 1 when a throughput target is missed (one whose baseline did "
                                                  "not run is reported as not measured)"),
        data: str = typer.Option(None, "--data", help="s3:// or obs:// shard set: compare it with the same shards on local "
                                 "disk (cold / warm cache / injected faults) instead of the pipeline comparison"),
        fault_rate: float = typer.Option(0.1, "--fault-rate", help="with --data: fraction of store requests that fail"),
        size: int = alias("--size"),
    ) -> None:
        """Images/s of torchport's jpeg / predecoded / folder pipelines vs PIL, DALI (CPU) and torchvision.io."""
        from torchport.log import console as make_console

        if deprecated_as:
            warn_deprecated(deprecated_as, f"torchport {deprecated_as}", "torchport data bench")
        size = renamed("data bench", "--image-size", image_size, "--size", size, default=224)
        # stdout stays clean for `--json -`; off a terminal nothing is wrapped (logs and CI get the whole table)
        console = make_console(stderr=json_out is not None and str(json_out) == "-")
        if data:  # object store vs local disk (torchport.cli._store_bench)
            from torchport.cli._common import guard
            from torchport.cli._store_bench import render_store_table, run_store_bench

            with guard("data bench"):
                result = run_store_bench(data, workers=workers, batch_size=batch_size, size=size, rounds=rounds,
                                         fault_rate=fault_rate, log=lambda s: console.print(f"[dim]{s}[/]"))
            console.print(render_store_table(result))
            write_json(json_out, result)
            if check and not all(r.get("meets_target", True) and not r.get("lost") and not r.get("extra")
                                 for r in result["results"].values()):
                raise typer.Exit(1)
            return
        try:
            cfg = BenchConfig(
                count=count, root=root, workers=workers, batch_size=batch_size, size=size, seconds=seconds, rounds=rounds,
                modes=tuple(m.strip() for m in modes.split(",") if m.strip()),
                baselines=tuple(b.strip() for b in baselines.split(",") if b.strip()),
                train_step=train_step, device=device_arg(device), profile=profile,
            )
        except ValueError as e:
            from torchport.cli._common import fail

            fail("data bench", str(e))
        problem = missing_photo_source(cfg)
        if problem is not None:
            from torchport.cli._common import fail

            fail("data bench", problem)
        result = run_bench(cfg, log=lambda s: console.print(f"[dim]{s}[/]"))
        for table in render_table(result):
            console.print(table)
        if write_json(json_out, result):
            console.print(f"wrote {json_out}")
        if png:
            render_png(result, png)
            console.print(f"wrote {png}")
        if check and any(r.get("meets_target") is False for r in result["results"].values()):
            raise typer.Exit(1)   # a missed target; one not measured is shown as such, not failed


