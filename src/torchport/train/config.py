"""The trainer's one typed config: CLI flags, a YAML/TOML file and the Python API all build a :class:`TrainConfig`.

Precedence, lowest first: field defaults < the config file (``--config run.yaml``) < flags given on
the command line. Unknown keys are errors everywhere (a typo must not silently train with a default).

Example::

    from torchport.train import TrainConfig, train
    cfg = TrainConfig(model="resnet50", data="/data/imagenet", image_size=224, epochs=90, batch_size=256,
                      optimizer="sgd", lr=0.1, weight_decay=1e-4, min_crop_scale=0.08)
    cfg = TrainConfig.from_file("run.yaml", epochs=1)       # file, then overrides
    result = train(cfg)

The same as a file (YAML; TOML takes the same keys at the top level)::

    model: resnet50
    data: /data/imagenet
    image_size: 224
    epochs: 90
    batch_size: 256
    optimizer: sgd
    lr: 0.1
    weight_decay: 0.0001
    min_crop_scale: 0.08
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from pathlib import Path
from typing import Any, Mapping, Optional

from torchport.backends.spec import PRECISIONS
from torchport.errors import ConfigError

__all__ = ["TrainConfig", "ConfigError", "load_config_file"]


def _field(default: Any, help: str, *, choices: tuple[str, ...] | None = None, flag: str | None = None) -> Any:
    """A dataclass field carrying its CLI help text (and allowed values) in metadata."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices, "flag": flag})


@dataclasses.dataclass(kw_only=True)
class TrainConfig:
    """Everything one training run needs. Field names are the YAML/TOML keys; flags are ``--kebab-case``.

    The defaults are the recipe for the embedded dataset on a small machine (``tinycnn``, 64 px, AdamW,
    15 epochs); for photos such as ImageNet set the model and the recipe (see ``docs/train.md``).
    """

    # -- data -----------------------------------------------------------------------------------------
    data: Optional[str] = _field(
        None, "ImageFolder root (with train/ and val/ sub-folders, or class folders directly) or a torchport "
        "shard directory. Default: the embedded synthetic dataset, generated once into the user cache.")
    image_size: int = _field(64, "Side of the square training/eval crop, in pixels.")
    min_crop_scale: float = _field(1.0, "Smallest area fraction kept by the random-resized-crop augmentation "
                                   "(1.0: resize + flip only, best for the embedded dataset; photos: 0.08).")
    val_crop_ratio: float = _field(1.0, "Eval: resize the short side to image_size / ratio, then center-crop "
                                   "(ImageNet recipes use 0.875).")
    val_fraction: float = _field(0.1, "Held-out fraction when the data dir has no val/ split.")
    bad_files: str = _field("skip", "Corrupt or non-image files: skip them (counted, reported each epoch) or "
                            "stop with an error.", choices=("skip", "error"))
    workers: Optional[int] = _field(None, "DataLoader worker processes per rank (default: the loader's own).")
    data_order: str = _field("auto", "Sample order: global (one shuffle, ranks strided); shards (each rank reads its own run "
                             "of shards: disjoint bytes per rank); auto: shards for s3:// / obs:// data, else global.",
                             choices=("auto", "global", "shards"))
    loader: str = _field("auto", "fast: torchport.data (libjpeg-turbo, shards); simple: a plain DataLoader (Pillow + "
                         "torchvision ops); auto: fast (holds out --val-fraction when there is no val/ split).", choices=("auto", "fast", "simple"))
    # -- model ----------------------------------------------------------------------------------------
    model: str = _field("tinycnn", "torchvision classification model name (resnet18/34/50, mobilenet_v3_small, "
                        "efficientnet_b0, ...) or torchport's 'tinycnn' (4 conv blocks, fast on a CPU).")
    num_classes: Optional[int] = _field(None, "Output classes (default: the number of class folders).")
    channels_last: bool = _field(False, "Use the channels_last memory format (faster convs on most accelerators).")
    compile: bool = _field(False, "torch.compile the model with the backend's compiler.")
    # -- optimisation ---------------------------------------------------------------------------------
    epochs: int = _field(15, "Passes over the training set.")
    max_steps: Optional[int] = _field(None, "Stop after this many optimizer steps (for smoke tests).")
    batch_size: int = _field(64, "Images per micro-batch per process.")
    accum_steps: int = _field(1, "Micro-batches accumulated per optimizer step.")
    optimizer: str = _field("adamw", "Optimizer.", choices=("sgd", "adamw"))
    lr: float = _field(0.006, "Peak learning rate (after warmup).")
    momentum: float = _field(0.9, "SGD momentum (AdamW uses beta1=0.9).")
    weight_decay: float = _field(0.05, "Weight decay on conv/linear weights (never on norms and biases).")
    schedule: str = _field("cosine", "LR schedule after warmup.", choices=("cosine", "step", "constant"))
    warmup_epochs: float = _field(0.5, "Linear LR warmup length, in epochs (fractions allowed).")
    lr_step_epochs: int = _field(30, "step schedule: multiply the LR by lr_gamma every this many epochs.")
    lr_gamma: float = _field(0.1, "step schedule: decay factor.")
    label_smoothing: float = _field(0.1, "Cross-entropy label smoothing.")
    clip_grad_norm: Optional[float] = _field(None, "Clip the total gradient norm to this value.")
    precision: str = _field("auto", "Numerics: auto picks bf16/fp16 where the device runs them fast (on a CPU bf16 "
                            "only with native bf16, else fp32: `torchport doctor` says which); amp = the backend's "
                            "low precision even where it is slow (one warning gives its cost).", choices=PRECISIONS)
    # -- where and how ---------------------------------------------------------------------------------
    device: Optional[str] = _field(None, "auto, a backend name or name:index (default: TORCHPORT_DEVICE or auto).")
    require_accelerator: Optional[bool] = _field(None, "Fail instead of running on CPU when no accelerator is found "
                                                 "(default: TORCHPORT_REQUIRE_ACCELERATOR).",
                                                 flag="--require-accelerator/--allow-cpu")
    strategy: str = _field("ddp", "Data parallelism over the ranks: ddp (a full model replica per process, gradients "
                           "all-reduced; single-file checkpoints) or fsdp (parameters, gradients and optimizer state "
                           "sharded with FSDP2: ~1/N of the memory per process; sharded DCP checkpoints that resume "
                           "on any number of processes).", choices=("ddp", "fsdp"))
    seed: int = _field(0, "Seed for init, shuffling and augmentation.")
    deterministic: bool = _field(False, "Ask torch for deterministic algorithms (slower).")
    # -- outputs, checkpoints ----------------------------------------------------------------------------
    run_dir: Optional[str] = _field(None, "This run's directory (default: <runs_root>/<timestamp>).")
    runs_root: str = _field("runs", "Parent of the default run directories.")
    resume: Optional[str] = _field(None, "'auto' (latest checkpoint of the run dir, or of the newest run under "
                                   "runs_root) or a checkpoint path.")
    trust_checkpoint: bool = _field(False, "The --resume checkpoint is yours: load pickled objects it holds (by "
                                    "default they are refused, since they could run code; docs/security.md).")
    checkpoint_dir: Optional[str] = _field(None, "Where checkpoints go: a directory or an s3:// / obs:// URL "
                                           "(default: <run_dir>/checkpoints; --resume auto looks there).")
    storage_endpoint: Optional[str] = _field(None, "Object-store endpoint for s3:// / obs:// URLs (default: "
                                             "TORCHPORT_STORAGE_ENDPOINT, AWS_ENDPOINT_URL[_S3], ~/.aws/config).")
    checkpoint_every: int = _field(0, "Also checkpoint every N optimizer steps (0: at epoch ends only).")
    keep_last: int = _field(3, "Checkpoints kept (older ones are deleted after a successful save).")
    log_every: int = _field(10, "Log (and sync the loss) every N optimizer steps.")
    progress: str = _field("auto", "Progress display: a rich bar on a terminal, plain lines otherwise.",
                           choices=("auto", "bar", "plain", "none"))
    tensorboard: Optional[bool] = _field(None, "Write TensorBoard events (default: when tensorboard is installed).")

    def __post_init__(self) -> None:
        self.validate()

    # -- validation -----------------------------------------------------------------------------------
    def validate(self) -> None:
        """Check types, choices and ranges; raise :class:`ConfigError` naming the key and the fix."""
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            setattr(self, f.name, _coerce(f.name, value, hints[f.name]))
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise ConfigError(f"{f.name}={getattr(self, f.name)!r} is not one of: {', '.join(choices)}")
        for name in ("image_size", "epochs", "batch_size", "accum_steps", "keep_last", "log_every", "lr_step_epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("max_steps", "num_classes"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1 (or unset)")
        if self.workers is not None and self.workers < 0:
            raise ConfigError(f"workers={self.workers} must be >= 0")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every={self.checkpoint_every} must be >= 0 (0: epoch ends only)")
        if not 0.0 < self.min_crop_scale <= 1.0:
            raise ConfigError(f"min_crop_scale={self.min_crop_scale} must be in (0, 1]")
        if not 0.0 < self.val_crop_ratio <= 1.0:
            raise ConfigError(f"val_crop_ratio={self.val_crop_ratio} must be in (0, 1]")
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction={self.val_fraction} must be in (0, 1)")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing={self.label_smoothing} must be in [0, 1)")
        if self.lr <= 0 or self.warmup_epochs < 0 or self.weight_decay < 0:
            raise ConfigError("lr must be > 0; warmup_epochs and weight_decay must be >= 0")
        if self.clip_grad_norm is not None and self.clip_grad_norm <= 0:
            raise ConfigError(f"clip_grad_norm={self.clip_grad_norm} must be > 0 (or unset)")
        _check_paths(self)

    # -- construction -----------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, source: str = "config") -> "TrainConfig":
        """Build from a mapping; ``kebab-case`` keys are accepted; unknown keys raise :class:`ConfigError`."""
        known = {f.name for f in dataclasses.fields(cls)}
        clean: dict[str, Any] = {}
        for key, value in values.items():
            name = str(key).replace("-", "_")
            if name not in known:
                close = difflib.get_close_matches(name, sorted(known), n=3)
                hint = f" Did you mean: {', '.join(close)}?" if close else f" Known keys: {', '.join(sorted(known))}."
                raise ConfigError(f"{source}: unknown key {key!r}.{hint}")
            clean[name] = value
        return cls(**clean)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> "TrainConfig":
        """Read a ``.yaml``/``.yml``/``.toml`` file, then apply ``overrides`` (e.g. CLI flags)."""
        values = load_config_file(path)
        values.update({k.replace("-", "_"): v for k, v in overrides.items()})
        return cls.from_dict(values, source=str(path))

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes`` applied (validated)."""
        return type(self).from_dict({**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        """Plain ``{key: value}`` (only str/int/float/bool/None: safe for JSON, YAML and checkpoints)."""
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        """YAML text that :meth:`from_file` reads back."""
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def markdown_table(cls) -> str:
        """The reference table of every key (pasted into ``docs/train.md``; a test keeps it in sync)."""
        lines = ["| key | flag | type | default | meaning |", "|---|---|---|---|---|"]
        for name, typ, default, help_text in cls.help_rows():
            lines.append(f"| `{name}` | `--{name.replace('_', '-')}` | {typ} | `{default}` | {help_text.replace('|', '/')} |")
        return "\n".join(lines) + "\n"

    @classmethod
    def help_rows(cls) -> list[tuple[str, str, Any, str]]:
        """``(name, type, default, help)`` per field (used to build the CLI and the docs)."""
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            choices = f.metadata.get("choices")
            help_text = f.metadata.get("help", "") + (f" [{'|'.join(choices)}]" if choices else "")
            rows.append((f.name, _type_name(hints[f.name]), f.default, help_text))
        return rows


def _check_paths(cfg: "TrainConfig") -> None:
    """Each path key: a local path or a store URL it supports, decided here (:mod:`torchport.paths`)."""
    from torchport.paths import check

    # The run directory stays local: metrics.jsonl and TensorBoard events are appended as training goes
    # (an object store has no append) and the one-writer lock is a local file. Checkpoints may live in a store.
    hint = "keep the run directory local and put checkpoints in the store with --checkpoint-dir"
    check(cfg.run_dir, option="--run-dir", local_hint=hint)
    check(cfg.runs_root, option="--runs-root", local_hint=hint)
    check(cfg.checkpoint_dir, option="--checkpoint-dir", remote=True)
    check(cfg.data, option="--data", remote=True)
    if cfg.resume != "auto":
        check(cfg.resume, option="--resume", remote=True)


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML or TOML config file into a dict (top-level keys only).

    Raises:
        ConfigError: missing file, unknown extension, parse error or a non-mapping document.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            from torchport._parse import loads

            data = loads(p.read_bytes(), fmt="yaml", what=str(p)) or {}
        elif suffix == ".toml":
            try:
                import tomllib  # noqa: F401 - Python >= 3.11 (torchport._parse reads it)
            except ModuleNotFoundError:  # pragma: no cover - Python 3.10
                try:
                    import tomli as tomllib  # type: ignore[no-redef]  # noqa: F401
                except ModuleNotFoundError:
                    raise ConfigError(f"{p}: reading TOML on Python 3.10 needs `pip install tomli` "
                                      "(or use a .yaml config)") from None
            from torchport._parse import loads

            data = loads(p.read_bytes(), fmt="toml", what=str(p))
        else:
            raise ConfigError(f"config file {str(p)!r}: unknown extension {suffix!r}; use .yaml, .yml or .toml")
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"config file {str(p)!r} could not be parsed: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping of keys to values, not {type(data).__name__}")
    return data


def _type_name(tp: Any) -> str:
    base, _optional = _unwrap_optional(tp)
    return base.__name__


def _unwrap_optional(tp: Any) -> tuple[type, bool]:
    args = typing.get_args(tp)
    if args and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return tp, False


def _coerce(name: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the field type; ints are accepted for floats, nothing else is converted."""
    base, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name} must be set (a {base.__name__}), got null")
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if base is str and isinstance(value, os.PathLike):
        return os.fspath(value)
    if base is int and isinstance(value, bool) or not isinstance(value, base):
        article = "an" if base.__name__[0] in "aeiou" else "a"
        raise ConfigError(f"{name}={value!r} must be {article} {base.__name__}, not {type(value).__name__}")
    return value
