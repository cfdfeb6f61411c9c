"""`torchport profile`: where a training step's time goes, the dominant term, and what to do.

Exit codes: 0 profiled; 2 bad settings (unknown model / preset / key, missing data dir,
unavailable device).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from torchport.cli._common import ExitCode, fail
from torchport.cli._options import (alias, device_arg, device_option, json_option, parse_precision, precision_option,
                                    preset_arg, renamed, require_accelerator_option, write_json)


def register(app: typer.Typer) -> None:
    """Attach this verb to the torchport app."""

    @app.command("profile")
    def profile(
        preset: Optional[str] = typer.Option(None, metavar="PRESET", help="Workload size: tiny | small | resnet50-224 "
                                             "(default resnet50-224: ResNet-50, batch 64, 224x224; 'seed' is its old name)."),
        config: Optional[Path] = typer.Option(None, "--config", help="YAML/JSON file of settings, keys named like the "
                                              "flags (batch_size, image_size, num_classes, trace ...); flags override it."),
        model: Optional[str] = typer.Option(None, help="torchvision model name or 'tinycnn'."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Images per step."),
        image_size: Optional[int] = typer.Option(None, "--image-size", help="Image side in pixels."),
        num_classes: Optional[int] = typer.Option(None, "--num-classes", help="Classifier outputs."),
        precision: Optional[str] = precision_option(None, help="Default fp32."),
        data: Optional[str] = typer.Option(None, help="'synthetic' or an ImageFolder directory."),
        workers: Optional[int] = typer.Option(None, help="DataLoader workers (default 0 for synthetic data)."),
        slow_data_ms: Optional[float] = typer.Option(None, help="Sleep this many ms per sample: a constructed input-bound case."),
        channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="channels_last memory format."),
        steps: Optional[int] = typer.Option(None, help="Timed steps (default: the preset's)."),
        warmup: Optional[int] = typer.Option(None, help="Untimed warm-up steps (default: the preset's)."),
        device: str = device_option(),
        require_accelerator: Optional[bool] = require_accelerator_option(),
        free_steps: Optional[int] = typer.Option(None, help="Free-running steps timed to show the profiler's own cost (0: skip)."),
        trace: Optional[Path] = typer.Option(None, "--trace", metavar="DIR", help="Write a Chrome trace (torch.profiler / vendor profiler) into DIR."),
        trace_steps: Optional[int] = typer.Option(None, help="Steps in the trace (default 3)."),
        hazards: Optional[str] = typer.Option(None, "--hazards", metavar="FILE",
                                              help="Also record performance hazards (host syncs, CPU-fallback "
                                              "operators, new shapes, float64/int64 work, by line) in 3 extra steps; "
                                              "write them to FILE (.json, .html or text by suffix; '-' = print)."),
        json_out: Optional[Path] = json_option("per-phase seconds, fractions and the dominant phase"),
        png: Optional[Path] = typer.Option(None, "--png", metavar="FILE", help="Write a stacked bar chart of the phases."),
        compile_model: Optional[bool] = typer.Option(None, "--compile", help="torch.compile the model with the "
                                                     "backend's compiler; the first (compiling) step is warm-up, "
                                                     "reported as 'compile: X s'."),
        batch: Optional[int] = alias("--batch"),
        size: Optional[int] = alias("--size"),
        classes: Optional[int] = alias("--classes"),
    ) -> None:
        """Profile training steps: data wait, copy, forward, backward, optimizer, other.

        Warm-up steps are excluded; phases are timed at device-synchronised boundaries and
        sum to the step. Prints the dominant term and the decision (input-bound /
        compute-bound / copy-bound), plus a warning that one platform's profile does not
        rank another's bottlenecks.
        """
        from torchport.backends.registry import UnknownBackendError
        from torchport.backends.spec import BackendUnavailable
        from torchport.log import console as make_console
        from torchport.errors import ConfigError
        from torchport.runtime.device import NoAcceleratorError

        batch_size = renamed("profile", "--batch-size", batch_size, "--batch", batch)
        image_size = renamed("profile", "--image-size", image_size, "--size", size)
        num_classes = renamed("profile", "--num-classes", num_classes, "--classes", classes)
        precision = parse_precision("profile", precision)
        preset = preset_arg("profile", preset)
        to_stdout = json_out is not None and str(json_out) == "-"
        console = make_console(stderr=to_stdout)
        try:
            from torchport.profile.loop import config_from_mapping, load_config_file, run_profile

            mapping = load_config_file(str(config)) if config else {}
            cfg = config_from_mapping(
                mapping, preset=preset, model=model, batch_size=batch_size, image_size=image_size,
                num_classes=num_classes, precision=precision, data=data, workers=workers, slow_data_ms=slow_data_ms,
                channels_last=channels_last, steps=steps, warmup=warmup, device=device_arg(device),
                free_steps=free_steps, trace=str(trace) if trace else None, trace_steps=trace_steps,
                require_accelerator=require_accelerator, compile=compile_model,
            )
            if hazards is not None and hazards != "-":
                from torchport._json import check_writable

                check_writable(hazards, what="--hazards report")
            with console.status(f"profiling {cfg.warmup} warm-up + {cfg.steps} steps ..."):
                result = run_profile(cfg)
            if hazards is not None:
                from torchport.profile.loop import run_hazards

                with console.status("recording hazards (3 steps) ..."):
                    hazard_report = run_hazards(cfg)
        except (ConfigError, BackendUnavailable, UnknownBackendError, FileNotFoundError) as exc:
            from torchport.errors import exit_code_for

            fail("profile", str(exc), exit_code_for(exc) or ExitCode.USAGE)
        except NoAcceleratorError as exc:
            fail("profile", str(exc), ExitCode.NO_ACCELERATOR)

        from torchport.profile.report import print_profile, write_png

        print_profile(result, console)
        if trace:
            files = result.settings.get("trace_files") or []
            plan = result.settings.get("trace_profiler") or {}
            console.print(f"trace ({plan.get('profiler')}, activities {', '.join(plan.get('activities', []))}): "
                          + (", ".join(files) or str(trace)))
        if hazards is not None:
            if hazards == "-":
                console.print(hazard_report.to_text(), markup=False, highlight=False, end="")
            else:
                from torchport.profile.hazards import write_hazards

                write_hazards(hazard_report, hazards, announce=console.print)
        if write_json(json_out, result.to_dict()):
            console.print(f"wrote {json_out}")
        if png:
            write_png(result, str(png))
            console.print(f"wrote {png}")
