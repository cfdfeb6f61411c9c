"""Profile a whole training setup: :func:`profile_loop` for your objects, :func:`run_profile` from a config.

``profile_loop`` runs the standard step (fetch, copy, forward, backward, optimizer)
under a :class:`~torchport.profile.profiler.StepProfiler`, warm-up first and excluded;
then, optionally, a few free-running steps (syncs only at step boundaries) to show
what the profiler's synchronisation cost, and a few traced steps for a Chrome trace.
The three passes are separate so tracing never pollutes the phase times.

Example::

    from torchport.profile import profile_loop
    result = profile_loop(model, loader, optimizer, torch.nn.CrossEntropyLoss(),
                          steps=20, warmup=3, amp=torchport.Amp("auto"))
    print(result.summary())
    result.analysis.verdict      # 'input-bound' / 'compute-bound' / 'copy-bound' / 'overhead-bound'
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Callable

from torchport.workload import Workload, amp_precision, build_model, describe, make_loader
from torchport.profile.profiler import ProfileResult, StepProfiler
from torchport.errors import ConfigError

__all__ = ["ProfileConfig", "profile_loop", "run_profile", "config_from_mapping", "load_config_file"]


@dataclasses.dataclass(kw_only=True)
class ProfileConfig:
    """Settings of ``torchport profile`` (CLI flags map one to one).

    Args:
        workload: model, batch, image size, data source, workers, slow-data delay.
        precision: ``fp32 | fp16 | bf16 | auto | amp`` (``amp``: the backend's mixed precision).
        steps: timed steps.
        warmup: untimed steps first.
        device: ``auto``, a backend name or ``name:index`` (None: ``TORCHPORT_DEVICE`` / auto).
        require_accelerator: refuse a CPU run (None: ``TORCHPORT_REQUIRE_ACCELERATOR``).
        trace_dir: write a Chrome trace of ``trace_steps`` extra steps here.
        trace_steps: steps in the trace.
        free_steps: extra free-running steps to measure the profiler's sync overhead (0: skip).
        lr: SGD learning rate (momentum 0.9).
        compile: ``torch.compile`` the model with the backend's compiler; its first step (the compile) runs
            before the warm-up steps, timed apart (``settings["compile_s"]``), never in the profile.
    """

    workload: Workload = dataclasses.field(default_factory=Workload)
    precision: str = "fp32"
    steps: int = 10
    warmup: int = 2
    device: str | None = None
    require_accelerator: bool | None = None
    trace_dir: str | None = None
    trace_steps: int = 3
    free_steps: int = 3
    lr: float = 0.01
    compile: bool = False

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ConfigError(f"steps={self.steps} must be >= 1")
        if self.warmup < 0 or self.trace_steps < 1 or self.free_steps < 0:
            raise ConfigError("warmup and free_steps must be >= 0 and trace_steps >= 1")


def _step_fn(model, optimizer, loss_fn, amp, device, channels_last: bool) -> Callable[[StepProfiler, Any], None]:
    from torchport.runtime.step import train_step as one_step

    def train_step(prof: StepProfiler, batch: Any) -> None:
        one_step(model, batch, optimizer, amp, loss_fn, device=device, channels_last=channels_last, phase=prof.phase)

    return train_step


def profile_loop(model, loader, optimizer, loss_fn, *, steps: int = 10, warmup: int = 2, amp: Any = None,
                 target: Any = None, channels_last: bool = False, trace_dir: str | None = None,
                 trace_steps: int = 3, free_steps: int = 0, settings: dict[str, Any] | None = None) -> ProfileResult:
    """Profile ``steps`` training steps of ``model`` fed by ``loader``.

    Args:
        model: already on the device.
        loader: iterable of ``(images, labels)`` host batches (re-iterated when it runs out).
        optimizer, loss_fn: the usual.
        steps: timed steps; warmup: untimed steps first.
        amp: a :class:`torchport.Amp` (default fp32).
        target: device target (default the current one).
        channels_last: convert inputs to channels_last after the copy.
        trace_dir: also write a Chrome trace of ``trace_steps`` steps there.
        free_steps: also time this many free-running steps (no phase syncs).
        settings: carried into the result's JSON.

    Returns:
        The :class:`ProfileResult` (``result.settings["trace_files"]`` lists trace files).
    """
    from torchport.runtime.amp import Amp
    from torchport.runtime.device import current

    target = target or current()
    amp = amp or Amp("fp32", target)
    train_step = _step_fn(model, optimizer, loss_fn, amp, target.device, channels_last)
    settings = dict(settings or {})

    prof = StepProfiler(warmup=warmup, target=target)
    for batch in prof.iterate(loader, steps=warmup + steps):
        train_step(prof, batch)

    unprofiled = None
    if free_steps:
        free = StepProfiler(warmup=1, target=target, sync=False)
        for batch in free.iterate(loader, steps=free_steps + 1):
            train_step(free, batch)
        unprofiled = statistics.median(r.total_s for r in free.timed)

    if trace_dir:
        from torchport.profile.trace import chrome_trace

        traced = StepProfiler(warmup=0, target=target, annotate=True)
        with chrome_trace(trace_dir, target) as tracer:
            for batch in traced.iterate(loader, steps=trace_steps):
                train_step(traced, batch)
                traced.step()
                tracer.step()
        settings["trace_files"] = tracer.files
        settings["trace_profiler"] = tracer.plan

    return prof.result(precision=amp.precision, settings=settings, unprofiled_step_s=unprofiled)


def run_profile(config: ProfileConfig) -> ProfileResult:
    """Build the configured model and data on the selected device and profile it.

    Returns:
        The :class:`ProfileResult`; ``settings`` records the workload and precision.
    """
    import torch

    from torchport.runtime.amp import Amp
    from torchport.runtime.device import current, select_device

    explicit = config.device or config.require_accelerator is not None
    target = select_device(config.device, require_accelerator=config.require_accelerator) if explicit else current()
    wl = config.workload
    loader, classes = make_loader(wl, target, length=4 * wl.batch, default_workers=0)
    precision = amp_precision(config.precision, target)
    model = build_model(wl, num_classes=classes).to(target.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9)
    amp = Amp(precision, target)
    settings = {
        "workload": dataclasses.asdict(wl),
        "description": describe(wl),
        "precision_requested": config.precision,
        "steps": config.steps,
        "warmup": config.warmup,
        "torch": torch.__version__,
    }
    run_model = model
    if config.compile:   # the compiling first step: warm-up, timed apart, on top of config.warmup
        from torchport.runtime.step import compile_backend_name, compile_model, timed_warmup_step, train_step

        run_model = compile_model(model, target)
        batch = next(iter(loader))
        settings["compile_s"] = round(timed_warmup_step(
            lambda: train_step(run_model, batch, optimizer, amp, torch.nn.CrossEntropyLoss(), device=target.device,
                               channels_last=wl.channels_last), target), 3)
        settings["compile_backend"] = compile_backend_name(target)
    return profile_loop(run_model, loader, optimizer, torch.nn.CrossEntropyLoss(), steps=config.steps,
                        warmup=config.warmup, amp=amp, target=target, channels_last=wl.channels_last,
                        trace_dir=config.trace_dir, trace_steps=config.trace_steps,
                        free_steps=config.free_steps, settings=settings)


#: Flag spellings (``--batch-size`` -> ``batch_size``) of the settings whose field names differ.
KEY_ALIASES = {"batch_size": "batch", "image_size": "size", "trace": "trace_dir"}


def config_from_mapping(mapping: dict[str, Any] | None = None, **overrides: Any) -> ProfileConfig:
    """Build a :class:`ProfileConfig` from a flat mapping (a config file) plus overrides (CLI flags).

    Keys are the ``torchport profile`` flags with underscores (``preset``, ``model``, ``batch_size``,
    ``image_size``, ``num_classes``, ``precision``, ``data``, ``steps``, ``warmup``, ``device``, ``trace``
    ...); the :class:`~torchport.workload.Workload` field names (``batch``, ``size``) and
    ``trace_dir`` are accepted too. ``None`` overrides are ignored.
    Without ``steps``/``warmup`` the preset's profile schedule is used.

    Raises:
        ConfigError: an unknown key (the message lists the known ones).

    Example::

        cfg = config_from_mapping({"preset": "tiny", "precision": "amp"}, steps=8)
    """
    from torchport.workload import from_preset

    merged = {KEY_ALIASES.get(k, k): v for k, v in (mapping or {}).items()}
    merged.update({KEY_ALIASES.get(k, k): v for k, v in overrides.items() if v is not None})
    wl_keys = {f.name for f in dataclasses.fields(Workload)}
    cfg_keys = {f.name for f in dataclasses.fields(ProfileConfig)} - {"workload"}
    unknown = sorted(set(merged) - wl_keys - cfg_keys - {"preset"})
    if unknown:
        flags = {k for k, v in KEY_ALIASES.items()}
        known = sorted((wl_keys | cfg_keys | flags) - set(KEY_ALIASES.values()))
        raise ConfigError(f"unknown profile setting(s) {', '.join(unknown)}; known: preset, {', '.join(known)}")
    workload, preset = from_preset(merged.get("preset"), **{k: v for k, v in merged.items() if k in wl_keys})
    cfg = {k: v for k, v in merged.items() if k in cfg_keys}
    cfg.setdefault("steps", preset.profile_steps)
    cfg.setdefault("warmup", preset.warmup)
    return ProfileConfig(workload=workload, **cfg)


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON profile config (a flat mapping, see :func:`config_from_mapping`)."""
    from torchport._parse import ParseError, loads

    with open(path, "rb") as fh:
        text = fh.read()
    try:
        data = loads(text, fmt="json" if path.endswith(".json") else "yaml", what=path)
    except ParseError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return data


def run_hazards(config: ProfileConfig, steps: int = 3) -> Any:
    """A separate short pass of the configured workload under the hazard recorder (``profile --hazards``).

    The timed profile runs without the recorder (its dispatch mode costs time per operator); this pass runs
    ``steps`` steps (no warm-up, trace or free-running steps) and attributes each hazard to the innermost
    torchport line on the stack (the built-in workload's code is torchport's).

    Returns:
        The :class:`~torchport.profile.hazards.HazardReport`.
    """
    import os

    import torchport
    from torchport.profile.hazards import record_hazards

    short = dataclasses.replace(config, steps=max(2, int(steps)), warmup=0, free_steps=0, trace_dir=None)
    with record_hazards(user_paths=[os.path.dirname(torchport.__file__)]) as rec:
        result = run_profile(short)
    rec.device = f"{result.device} ({result.backend})"
    return rec.report()
