"""Models by name: every torchvision classification model, plus ``tinycnn`` for smoke tests.

Example::

    model = build_model("resnet50", num_classes=1000, image_size=224)
    model = build_model("tinycnn", num_classes=4, image_size=32)     # ~20k parameters
"""

from __future__ import annotations

import difflib
from typing import Callable

from torchport.errors import ConfigError

__all__ = ["build_model", "model_names", "LOCAL_MODELS"]


def _tiny_cnn(num_classes: int, image_size: int):
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


#: torchport's own models (name -> ``(num_classes, image_size) -> nn.Module``).
LOCAL_MODELS: dict[str, Callable] = {"tinycnn": _tiny_cnn}


def model_names() -> list[str]:
    """Every accepted model name: torchport's own, then torchvision's classification models."""
    import torchvision

    return sorted(LOCAL_MODELS) + sorted(torchvision.models.list_models(module=torchvision.models))


def build_model(name: str, *, num_classes: int, image_size: int):
    """Build an untrained classifier by name.

    Args:
        name: ``tinycnn`` or a torchvision classification model (``resnet18``, ``resnet50``,
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

    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        close = difflib.get_close_matches(name, sorted(LOCAL_MODELS) + known, n=4)
        raise ConfigError(
            f"model {name!r} is not a torchvision classification model"
            + (f"; did you mean: {', '.join(close)}?" if close else "")
            + " (list them with torchvision.models.list_models(module=torchvision.models))"
        )
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
