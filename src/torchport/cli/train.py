"""``torchport train``: the reference image-classification trainer.

Every :class:`~torchport.train.config.TrainConfig` field is a ``--kebab-case`` flag (generated
from the dataclass, so the flags, the YAML/TOML keys and the Python API cannot drift apart).
Precedence: defaults < ``--config FILE`` < flags.

Exit codes (:class:`torchport.errors.ExitCode`, table in docs/cli.md): 0 trained; 2 bad configuration,
unknown or unavailable ``--device``; 3 bad data; 4 training diverged (non-finite loss); 5 checkpoint
read/write/verify failure; 6 run directory not writable; 7 accelerator required but none present;
8 a rank died or a collective timed out; 9 another trainer holds the run/checkpoint directory; 130 / 143
stopped by SIGINT / SIGTERM after writing a checkpoint, the summary and curves (the message is the resume
command).

Examples::

    torchport train                                   # embedded dataset, best device, defaults
    torchport train --data /data/imagenet --model resnet50 --batch-size 256 --precision auto
    torchport train --config run.yaml --epochs 1 --json summary.json
    torchrun --nproc-per-node 8 -m torchport train --data /data/imagenet --model resnet50
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import typing
from typing import Any, Optional

import typer

from torchport.cli._options import MARKUP, device_help, normalise_help, write_json

EXIT_CONFIG, EXIT_DATA, EXIT_DIVERGED, EXIT_CHECKPOINT = 2, 3, 4, 5


def _config_params() -> list[inspect.Parameter]:
    """One ``typer.Option`` per config field, all defaulting to None (= "not given on the command line")."""
    from torchport.train.config import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    params = []
    for f in dataclasses.fields(TrainConfig):
        base = typing.get_args(hints[f.name])
        base = next((a for a in base if a is not type(None)), hints[f.name]) if base else hints[f.name]
        flag = "--" + f.name.replace("_", "-")
        decl = f.metadata.get("flag") or (f"{flag}/--no-{flag[2:]}" if base is bool else flag)
        choices = f.metadata.get("choices")
        help_text = device_help() if f.name == "device" else f.metadata.get("help", "")
        help_text += f" One of: {' | '.join(choices)}." if choices else ""
        if f.default is not None and "default" not in help_text.lower():   # the default once, when there is one
            help_text += f" (default: {str(f.default).lower() if isinstance(f.default, bool) else f.default})"
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[base],
                                        default=typer.Option(None, decl, help=help_text, show_default=False)))
    return params


def run_train(config: Optional[str], json_out: Optional[str], print_config: bool, flags: dict[str, Any]) -> int:
    """Build the config, train, report; returns the exit code."""
    from torchport.errors import StorageError
    from torchport.runtime.distributed import collective_failure, destroy
    from torchport.train.config import TrainConfig
    from torchport.data.errors import DataError  # base of the trainer's and torchport.data's errors
    from torchport.train.loop import train
    from torchport.train.stop import Stopped

    given = {k: v for k, v in flags.items() if v is not None}
    cfg = TrainConfig.from_file(config, **given) if config else TrainConfig.from_dict(given, source="flags")
    if print_config:
        sys.stdout.write(cfg.to_yaml())
        return 0
    if json_out not in (None, "-"):   # decided before training, not when the summary is written
        from torchport.paths import resolve

        resolve(json_out, option="--json")      # a URL: one line (a local file only)
    from torchport._json import check_writable

    check_writable(json_out, what="--json file")   # before training, not after it
    try:
        # Known errors (bad config, unavailable/unknown device, no accelerator, checkpoint, divergence,
        # a dead rank) carry their exit code and become one line in the guard around every verb.
        # `--json -`: stdout carries only the summary JSON; progress lines go to stderr
        with contextlib.redirect_stdout(sys.stderr) if json_out == "-" else contextlib.nullcontext():
            result = train(cfg)
    except Stopped as exc:   # SIGTERM / SIGINT: the summary was written; --json gets it too, then exit 143 / 130
        if exc.result is not None:
            write_json(json_out, dataclasses.asdict(exc.result))
        raise
    except DataError as exc:
        # DataLoader workers wrap errors with a traceback; the user needs the final message only
        raise _same_ranks(exc, DataError(_last_line(exc))) from None
    except StorageError as exc:  # object store: missing / denied / unreachable (retries exhausted), maybe from a worker
        raise _same_ranks(exc, StorageError(_last_line(exc))) from None
    except RuntimeError as exc:
        failure = collective_failure(exc)      # another rank died or went silent: one line, exit 8
        if failure is None:
            raise
        raise failure from None
    finally:
        destroy()   # leave the process group cleanly (torchrun); a no-op in a single process
    write_json(json_out, dataclasses.asdict(result))
    return 0


def _same_ranks(old: BaseException, new: BaseException) -> BaseException:
    """``new``, marked as raised on every rank when ``old`` was (:func:`torchport.errors.on_every_rank`)."""
    from torchport.errors import on_every_rank, raised_on_every_rank

    return on_every_rank(new) if raised_on_every_rank(old) else new


def _last_line(exc: BaseException) -> str:
    """DataLoader workers wrap errors with a traceback; the user needs the final message only."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1].split(": ", 1)[-1] if len(lines) > 1 else (lines[0] if lines else type(exc).__name__)


def _command(config: Optional[str] = None, json_out: Optional[str] = None, print_config: bool = False, **flags: Any):
    code = run_train(config, json_out, print_config, flags)
    if code:
        raise typer.Exit(code)


_command.__signature__ = inspect.Signature([
    inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                      default=typer.Option(None, "--config", help="YAML or TOML file of config keys (flags override it).")),
    inspect.Parameter("json_out", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                      default=typer.Option(None, "--json", metavar="FILE",
                                           help="Write the run summary (metrics, paths) as JSON to FILE ('-' for stdout).")),
    inspect.Parameter("print_config", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                      default=typer.Option(False, "--print-config", help="Print the resolved config as YAML and exit.")),
    *_config_params(),
])
_command.__doc__ = ("Train an image classifier on any backend (CPU, GPU, Ascend NPU, emulated NPU) with portable, "
                    "resumable checkpoints. Without --data it trains on an embedded synthetic dataset.")


def register(app: typer.Typer) -> None:
    """Attach this verb to the torchport app (inside the error guard, whichever app it is)."""
    from torchport.cli._common import guarded

    app.command("train")(guarded("train", _command))


def main() -> None:
    """Standalone entry (``python -m torchport.train``)."""
    from torchport.cli._common import guarded

    app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False, rich_markup_mode=MARKUP)
    app.command()(guarded("train", _command))
    normalise_help(typer.main.get_command(app))(prog_name="torchport train")


def convert_main() -> None:
    """``python -m torchport.train.convert SRC DST``."""
    import typer

    from torchport.cli._common import guarded
    from torchport.cli._options import MARKUP, normalise_help

    def _command(src: str = typer.Argument(..., help="Trainer checkpoint: a ckpt-*.pt file (ddp) or a step-* DCP "
                                                      "directory (fsdp); local or s3:// / obs://."),
                 dst: str = typer.Argument(..., help="Where the other layout goes (a DCP directory for a .pt SRC, "
                                                      "a .pt file for a DCP SRC)."),
                 trust_checkpoint: bool = typer.Option(False, "--trust-checkpoint",
                                                       help="SRC is yours: load pickled objects it holds (by "
                                                            "default they are refused: they could run code).")
                 ) -> None:
        from torchport.train.convert import convert_checkpoint

        out = convert_checkpoint(src, dst, trust=trust_checkpoint)
        typer.echo(f"converted {src} -> {out}")

    _command.__doc__ = "Convert a trainer checkpoint between --strategy ddp (one file) and fsdp (sharded DCP), both ways."
    app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False, rich_markup_mode=MARKUP)
    app.command()(guarded("train convert", _command))
    normalise_help(typer.main.get_command(app))(prog_name="python -m torchport.train.convert")
