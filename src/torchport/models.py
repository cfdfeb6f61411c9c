"""Models by name: every torchvision classification model, plus torchport's small models -- the one
module that defines them, one name per network.

* ``tinycnn`` -- four conv-BN-ReLU-pool blocks, ~100k parameters: the trainer's default, and the small
  model of ``torchport bench`` / ``profile`` / ``check``.
* ``twoconv`` -- two conv-BN-ReLU layers, ~6k parameters: the checks' built-in target and overhead
  measurements.
* ``patchnet`` -- an 8x8 patchify conv and one more conv: almost free per image, so a training step
  fed by it measures the input pipeline (``torchport data bench``).

Example::

    model = build_model("resnet50", num_classes=1000, image_size=224)
    model = build_model("tinycnn", num_classes=4, image_size=32)     # ~100k parameters
"""

from __future__ import annotations

import difflib
from typing import Callable

from torchport.errors import ConfigError

__all__ = ["build_model", "check_model_name", "model_names", "LOCAL_MODELS", "tinycnn", "twoconv", "patchnet"]


def tinycnn(num_classes: int, image_size: int | None = None):
    """Four conv-BN-ReLU-pool blocks (16-32-64-128 channels, ~100k parameters) and a linear head.

    About 5x cheaper per image than resnet18 at 64 px, so on a CPU it can afford the many optimizer
    steps a from-scratch model needs; it still has BatchNorm, so running statistics and
    train/eval mode are exercised as in a ResNet.
    """
    from torch import nn

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.MaxPool2d(2))

    return nn.Sequential(block(3, 16), block(16, 32), block(32, 64), block(64, 128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_classes))


def twoconv(num_classes: int, image_size: int | None = None, *, dropout: float = 0.0):
    """conv-BN-ReLU (16) and a strided conv-BN-ReLU (32), global pool, optional dropout, linear (~6k parameters)."""
    from torch import nn

    return nn.Sequential(   # blocks are sub-Sequentials: module names model.0.0, model.1.0 locate the convs
        nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()),
        nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(32), nn.ReLU()),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), *([nn.Dropout(dropout)] if dropout else []), nn.Linear(32, num_classes),
    )


def patchnet(num_classes: int, image_size: int | None = None):
    """An 8x8/8 patchify conv (224 -> 28), one strided conv, pool, linear: compute that costs next to nothing."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 8, stride=8), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes),
    )


#: torchport's own models (name -> ``(num_classes, image_size) -> nn.Module``).
LOCAL_MODELS: dict[str, Callable] = {"tinycnn": tinycnn, "twoconv": twoconv, "patchnet": patchnet}


def model_names() -> list[str]:
    """Every accepted model name: torchport's own, then torchvision's classification models."""
    import torchvision

    return sorted(LOCAL_MODELS) + sorted(torchvision.models.list_models(module=torchvision.models))


def check_model_name(name: str) -> None:
    """Raise :class:`ConfigError` (with the closest matches) unless ``name`` is a model :func:`build_model` knows.

    Cheap (no model is built): the trainer calls it before it looks at the data."""
    if name in LOCAL_MODELS:
        return
    import torchvision

    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        close = difflib.get_close_matches(name, sorted(LOCAL_MODELS) + known, n=4)
        raise ConfigError(
            f"unknown model {name!r}: neither torchport's ({', '.join(LOCAL_MODELS)}) nor a torchvision "
            "classification model"
            + (f"; did you mean: {', '.join(close)}?" if close else "")
            + " (list them with torchvision.models.list_models(module=torchvision.models))"
        )


def build_model(name: str, *, num_classes: int, image_size: int):
    """Build an untrained classifier by name.

    Args:
        name: one of :data:`LOCAL_MODELS` or a torchvision classification model (``resnet18``, ``resnet50``,
            ``mobilenet_v3_small``, ``efficientnet_b0``, ``vit_b_16`` ...).
        num_classes: size of the output layer.
        image_size: input side; models that bake it in (ViT) are built for it.

    Returns:
        An ``nn.Module`` on CPU with randomly initialised weights (no downloads).

    Raises:
        ConfigError: unknown name (with the closest matches).
    """
    if name in LOCAL_MODELS:
        return LOCAL_MODELS[name](num_classes, image_size)
    import torchvision

    check_model_name(name)
    kwargs = {"weights": None, "num_classes": num_classes}
    if name.startswith("vit_"):
        kwargs["image_size"] = image_size
    if name.startswith(("resnet", "resnext", "wide_resnet")):
        # Each residual block starts as the identity (last BatchNorm scale 0): trains faster and more
        # stably from scratch, especially in the first few hundred steps (Goyal et al., 2017).
        kwargs["zero_init_residual"] = True
    try:
        return torchvision.models.get_model(name, **kwargs)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ConfigError(f"model {name!r} cannot be built for num_classes={num_classes}, "
                          f"image_size={image_size}: {exc}") from None
