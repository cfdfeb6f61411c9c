"""The training workload that ``torchport bench`` and ``torchport profile`` measure: model + data.

A :class:`Workload` names a model (any torchvision classification model, or the
built-in ``tinycnn``), the batch, the image size and the data source: ``"synthetic"``
(random images made once, so data costs nothing) or an ImageFolder directory (the
real input pipeline, decoded by a DataLoader). Presets size it for the machine:
``tiny`` and ``small`` run on a CPU in seconds, ``resnet50-224`` is the reference setup
(ResNet-50, batch 64, 224x224) the issue's Ascend numbers come from.

Example::

    from torchport.workload import Workload, build_model, host_batches
    wl = Workload(model="resnet18", batch=8, size=64, num_classes=10)
    model = build_model(wl)
    x, y = next(iter(host_batches(wl)))      # x: (8, 3, 64, 64) float32, y: (8,) int64
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from typing import Any, Iterator

from torchport.errors import ConfigError

__all__ = [
    "Workload",
    "Preset",
    "PRESETS",
    "preset",
    "build_model",
    "SyntheticImages",
    "SlowDataset",
    "host_batches",
    "make_loader",
    "cycle",
    "describe",
    "amp_precision",
    "from_preset",
    "preset_name",
    "PRESET_ALIASES",
    "DEFAULT_PRESET",
]


@dataclasses.dataclass(kw_only=True)
class Workload:
    """What one training step runs on.

    Args:
        model: torchvision model name (``resnet50``, ``resnet18``, ``mobilenet_v3_small``...)
            or one of :mod:`torchport.models` (``tinycnn``, ``twoconv``, ``patchnet``).
        batch: images per step.
        size: square image side in pixels.
        num_classes: classifier outputs (an ImageFolder's class count wins when larger).
        channels_last: run the model and inputs in ``torch.channels_last`` memory format.
        data: ``"synthetic"`` or a directory in ImageFolder layout (``DIR/<class>/<image>``).
        workers: DataLoader workers (None: ``torchport.loader_kwargs`` policy; synthetic data
            in the profiler defaults to 0).
        slow_data_ms: extra delay per *sample* in the dataset (``time.sleep``), to build an
            input-bound case on purpose.
        seed: seeds model initialisation and synthetic data (FP32 and AMP start identical).
    """

    model: str = "resnet50"
    batch: int = 64
    size: int = 224
    num_classes: int = 1000
    channels_last: bool = False
    data: str = "synthetic"
    workers: int | None = None
    slow_data_ms: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch", "size", "num_classes"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"workload {name}={getattr(self, name)!r} must be >= 1")
        if self.slow_data_ms < 0:
            raise ConfigError(f"slow_data_ms={self.slow_data_ms!r} must be >= 0")
        if self.workers is not None and self.workers < 0:
            raise ConfigError(f"workers={self.workers!r} must be >= 0")
        if self.data != "synthetic" and not os.path.isdir(self.data):
            raise ConfigError(
                f"data={self.data!r} is neither 'synthetic' nor a directory; pass an ImageFolder "
                "directory (DIR/<class>/<image files>) or 'synthetic'"
            )

    @property
    def synthetic(self) -> bool:
        """True when the data is generated, not read from disk."""
        return self.data == "synthetic"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Preset:
    """A named workload size plus the timing schedule that fits it.

    Args:
        workload: model / batch / size / classes.
        windows: timed windows (the median and spread are taken over them).
        steps_per_window: training steps per window.
        warmup: untimed steps first (graph compilation, allocator warm-up, autotuning).
        profile_steps: timed steps for ``torchport profile``.
    """

    workload: dict[str, Any]
    windows: int
    steps_per_window: int
    warmup: int
    profile_steps: int
    note: str = ""


#: ``tiny``/``small`` run on a 2-core CPU in seconds; ``resnet50-224`` is the reference setup (ResNet-50, 224²).
PRESETS: dict[str, Preset] = {
    "tiny": Preset(workload=dict(model="squeezenet1_1", batch=16, size=64, num_classes=10),
                   windows=3, steps_per_window=2, warmup=1, profile_steps=4,
                   note="SqueezeNet 1.1, 16 x 64x64: seconds on a CPU; activations dominate memory as in the seed"),
    "small": Preset(workload=dict(model="resnet18", batch=32, size=112, num_classes=100),
                    windows=5, steps_per_window=3, warmup=2, profile_steps=8,
                    note="ResNet-18, 32 x 112x112: about a minute on a laptop CPU"),
    "resnet50-224": Preset(workload=dict(model="resnet50", batch=64, size=224, num_classes=1000),
                   windows=5, steps_per_window=20, warmup=10, profile_steps=20,
                   note="ResNet-50, 64 x 224x224: the reference (Ascend 910B3: 545 -> 1254 img/s)"),
}


#: Old preset names, still accepted with a FutureWarning.
PRESET_ALIASES = {"seed": "resnet50-224"}

#: The preset used when none is named (the reference workload).
DEFAULT_PRESET = "resnet50-224"


def preset_name(name: str | None) -> str:
    """The canonical preset name (``None`` = :data:`DEFAULT_PRESET`; an old name warns and maps)."""
    if name is None:
        return DEFAULT_PRESET
    if name in PRESET_ALIASES:
        import warnings

        warnings.warn(f"preset {name!r} is deprecated; use {PRESET_ALIASES[name]!r}", FutureWarning, stacklevel=3)
        return PRESET_ALIASES[name]
    return name


def preset(name: str) -> Preset:
    """Look up a preset by name; the error lists the known ones."""
    try:
        return PRESETS[preset_name(name)]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None


# -- models: torchport.models (tinycnn, twoconv, patchnet) or torchvision ----------------------
def build_model(workload: Workload, num_classes: int | None = None):
    """Build the workload's model on the host, initialised from ``workload.seed``.

    Args:
        workload: names the model.
        num_classes: override ``workload.num_classes`` (e.g. an ImageFolder's class count).

    Returns:
        A ``torch.nn.Module`` in train mode (channels_last when the workload asks).

    Raises:
        ConfigError: unknown model name (lists a few known ones).
    """
    import torch

    from torchport.models import build_model as build_named

    torch.manual_seed(workload.seed)
    model = build_named(workload.model, num_classes=num_classes or workload.num_classes, image_size=workload.size)
    if workload.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model.train()


# -- data --------------------------------------------------------------------------------
class SyntheticImages:
    """A map-style dataset of random, already-normalised images (deterministic per index).

    Images come from a small pool made once, so a sample costs one copy: the data phase
    of a profile then measures the loader machinery, not image generation.

    Args:
        length: number of samples.
        size: image side.
        num_classes: labels are ``index % num_classes``.
        seed: pool seed.
        pool: distinct images generated.
    """

    def __init__(self, length: int, size: int, num_classes: int, *, seed: int = 0, pool: int = 8) -> None:
        import torch

        gen = torch.Generator().manual_seed(seed)
        self.length = int(length)
        self.num_classes = int(num_classes)
        self.images = torch.randn(pool, 3, size, size, generator=gen)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        import torch

        if not 0 <= index < self.length:
            raise IndexError(index)
        return self.images[index % len(self.images)].clone(), torch.tensor(index % self.num_classes)


class SlowDataset:
    """Wrap a dataset and sleep ``delay_ms`` per sample: a constructed input-bound pipeline."""

    def __init__(self, dataset: Any, delay_ms: float) -> None:
        self.dataset = dataset
        self.delay_s = float(delay_ms) / 1000.0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        time.sleep(self.delay_s)
        return self.dataset[index]


def _image_folder(workload: Workload):
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder

    tf = T.Compose([
        T.RandomResizedCrop(workload.size, antialias=True),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
    ])
    ds = ImageFolder(workload.data, transform=tf)
    if len(ds) < workload.batch:
        raise ConfigError(f"data={workload.data!r} holds {len(ds)} images, fewer than one batch of {workload.batch}")
    return ds


def make_loader(workload: Workload, target: Any = None, *, length: int | None = None, default_workers: int | None = 0):
    """A ``DataLoader`` over the workload's data with the backend's loader policy.

    Args:
        workload: data source, batch, workers, slow-data delay.
        target: the device target (pin-memory policy); default the current one.
        length: synthetic dataset length (default 4 batches).
        default_workers: workers when ``workload.workers`` is None (None: the policy's).

    Returns:
        ``(loader, num_classes)``.
    """
    from torch.utils.data import DataLoader

    from torchport.runtime.loader import loader_kwargs

    if workload.synthetic:
        ds: Any = SyntheticImages(length or 4 * workload.batch, workload.size, workload.num_classes, seed=workload.seed)
        classes = workload.num_classes
    else:
        ds = _image_folder(workload)
        classes = max(workload.num_classes, len(ds.classes))
    if workload.slow_data_ms > 0:
        ds = SlowDataset(ds, workload.slow_data_ms)
    workers = workload.workers if workload.workers is not None else default_workers
    kw = loader_kwargs(target, num_workers=workers, seed=workload.seed)
    loader = DataLoader(ds, batch_size=workload.batch, shuffle=not workload.synthetic, drop_last=True, **kw)
    return loader, classes


def host_batches(workload: Workload, count: int = 2, *, pin: bool = False) -> list:
    """``count`` ready-made ``(images, labels)`` batches on the host: instant data for model benchmarks.

    Args:
        workload: batch, size, classes, seed.
        count: distinct batches (cycled by the caller).
        pin: page-lock them (falls back to pageable memory where pinning is unsupported).
    """
    import torch

    ds = SyntheticImages(workload.batch * count, workload.size, workload.num_classes, seed=workload.seed)
    out = []
    for b in range(count):
        items = [ds[b * workload.batch + i] for i in range(workload.batch)]
        x = torch.stack([it[0] for it in items])
        y = torch.stack([it[1] for it in items])
        if pin:
            try:
                x, y = x.pin_memory(), y.pin_memory()
            except (RuntimeError, NotImplementedError):
                pass
        out.append((x, y))
    return out


def cycle(iterable: Any) -> Iterator:
    """Iterate ``iterable`` forever, re-iterating it when exhausted (unlike ``itertools.cycle``,
    which replays cached items: a DataLoader must re-run to reshuffle and re-decode)."""
    if isinstance(iterable, (list, tuple)):
        yield from itertools.cycle(iterable)
        return
    while True:
        empty = True
        for item in iterable:
            empty = False
            yield item
        if empty:
            raise ConfigError("the data source yielded no batches (fewer samples than one batch?)")


def describe(workload: Workload) -> str:
    """One line for report headers: ``resnet50, batch 64, 224x224, synthetic data``."""
    data = "synthetic data" if workload.synthetic else f"data {workload.data}"
    extra = ", channels_last" if workload.channels_last else ""
    slow = f", +{workload.slow_data_ms:g} ms/sample data delay" if workload.slow_data_ms else ""
    return f"{workload.model}, batch {workload.batch}, {workload.size}x{workload.size}, {data}{extra}{slow}"


def amp_precision(label: str, target: Any) -> str:
    """Resolve a precision label for ``target``'s backend.

    ``"amp"`` means the backend's mixed precision: its ``auto`` policy, or -- where that
    is fp32 (the CPU) -- the first low precision the backend runs (bf16 on CPU).
    ``"fp32" | "fp16" | "bf16" | "auto"`` pass through to :class:`torchport.Amp`.

    Raises:
        ConfigError: unknown label, or ``"amp"`` on a backend without any low precision.
    """
    from torchport.backends.spec import PRECISIONS

    label = label.strip().lower()
    if label not in PRECISIONS:
        raise ConfigError(f"precision {label!r} is not one of {', '.join(PRECISIONS)}")
    if label != "amp":
        return label
    low = target.backend.amp.low()
    if low is None:
        raise ConfigError(f"backend {target.backend.label!r} has no usable low precision; AMP cannot run here")
    return low


def from_preset(name: str | None, **overrides: Any) -> tuple[Workload, Preset]:
    """The preset's workload with ``overrides`` (None values ignored) applied on top.

    Args:
        name: preset name; None means ``"resnet50-224"`` (ResNet-50, batch 64, 224x224).
        overrides: :class:`Workload` fields set explicitly (CLI flags, config file).

    Raises:
        ConfigError: unknown preset or unknown workload field.
    """
    p = preset(preset_name(name))
    fields = {f.name for f in dataclasses.fields(Workload)}
    unknown = sorted(k for k in overrides if k not in fields)
    if unknown:
        raise ConfigError(f"unknown workload setting(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
    merged = {**p.workload, **{k: v for k, v in overrides.items() if v is not None}}
    return Workload(**merged), p
