"""`torchport profile`: where a training step's time goes, the dominant term, and what to do.

Exit codes: 0 profiled; 2 bad settings (unknown model / preset / key, missing data dir,
unavailable device).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Attach this verb to the torchport app."""

    @app.command("profile")
    def profile(
        preset: Optional[str] = typer.Option(None, help="Workload size: tiny | small | seed (default seed: resnet50, 64, 224)."),
        config: Optional[Path] = typer.Option(None, "--config", help="YAML/JSON file of settings (flags override it)."),
        model: Optional[str] = typer.Option(None, help="torchvision model name or 'tinycnn'."),
        batch: Optional[int] = typer.Option(None, help="Images per step."),
        size: Optional[int] = typer.Option(None, help="Image side in pixels."),
        classes: Optional[int] = typer.Option(None, "--classes", help="Classifier outputs."),
        precision: Optional[str] = typer.Option(None, help="fp32 | amp | fp16 | bf16 | auto (default fp32)."),
        data: Optional[str] = typer.Option(None, help="'synthetic' or an ImageFolder directory."),
        workers: Optional[int] = typer.Option(None, help="DataLoader workers (default 0 for synthetic data)."),
        slow_data_ms: Optional[float] = typer.Option(None, help="Sleep this many ms per sample: a constructed input-bound case."),
        channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="channels_last memory format."),
        steps: Optional[int] = typer.Option(None, help="Timed steps (default: the preset's)."),
        warmup: Optional[int] = typer.Option(None, help="Untimed warm-up steps (default: the preset's)."),
        device: Optional[str] = typer.Option(None, help="auto | backend | backend:index (default TORCHPORT_DEVICE / auto)."),
        free_steps: Optional[int] = typer.Option(None, help="Free-running steps timed to show the profiler's own cost (0: skip)."),
        trace: Optional[Path] = typer.Option(None, "--trace", help="Write a Chrome trace (torch.profiler / vendor profiler) into DIR."),
        trace_steps: Optional[int] = typer.Option(None, help="Steps in the trace (default 3)."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write per-phase seconds, fractions and the dominant phase."),
        png: Optional[Path] = typer.Option(None, "--png", help="Write a stacked bar chart of the phases."),
    ) -> None:
        """Profile training steps: data wait, copy, forward, backward, optimizer, other.

        Warm-up steps are excluded; phases are timed at device-synchronised boundaries and
        sum to the step. Prints the dominant term and the decision (input-bound /
        compute-bound / copy-bound), plus a warning that one platform's profile does not
        rank another's bottlenecks.
        """
        from rich.console import Console

        from torchport.backends.registry import UnknownBackendError
        from torchport.backends.spec import BackendUnavailable
        from torchport.runtime.device import ConfigError

        console = Console()
        try:
            from torchport.profile.loop import config_from_mapping, load_config_file, run_profile

            mapping = load_config_file(str(config)) if config else {}
            cfg = config_from_mapping(
                mapping, preset=preset, model=model, batch=batch, size=size, num_classes=classes,
                precision=precision, data=data, workers=workers, slow_data_ms=slow_data_ms,
                channels_last=channels_last, steps=steps, warmup=warmup, device=device,
                free_steps=free_steps, trace_dir=str(trace) if trace else None, trace_steps=trace_steps,
            )
            with console.status(f"profiling {cfg.warmup} warm-up + {cfg.steps} steps ..."):
                result = run_profile(cfg)
        except (ConfigError, BackendUnavailable, UnknownBackendError, FileNotFoundError) as exc:
            from torchport.cli._common import fail
            from torchport.errors import ExitCode, exit_code_for

            fail("profile", str(exc), exit_code_for(exc) or ExitCode.USAGE)

        from torchport.profile.report import print_profile, write_json, write_png

        print_profile(result, console)
        if trace:
            files = result.settings.get("trace_files") or []
            plan = result.settings.get("trace_profiler") or {}
            console.print(f"trace ({plan.get('profiler')}, activities {', '.join(plan.get('activities', []))}): "
                          + (", ".join(files) or str(trace)))
        if json_out:
            write_json(result, str(json_out))
            console.print(f"wrote {json_out}")
        if png:
            write_png(result, str(png))
            console.print(f"wrote {png}")
