"""The baseline we measure against -- kept for comparison, not recommended.

This is the classic pipeline found in most training repositories: ``torchvision.datasets.ImageFolder``
opening each JPEG with PIL, then ``RandomResizedCrop(224)``, ``RandomHorizontalFlip()``,
``ToTensor()``, ``Normalize(mean, std)`` in Python per sample, collated into float batches by a
DataLoader. Every worker decodes at full size, converts to float32 per image and ships 4x the
bytes of a uint8 batch between processes; adding workers does not help once the CPUs are busy.

Example::

    loader = baseline_loader(root, batch_size=64, num_workers=2, train=True)
"""

from __future__ import annotations

import os
from typing import Any

from torchport.data.augment import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["baseline_transform", "baseline_loader"]


def baseline_transform(size: int = 224, *, train: bool = True):
    """torchvision's classic ImageNet transform (PIL, per sample)."""
    import torchvision.transforms as T

    if train:
        ops = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()]
    else:
        ops = [T.Resize(int(round(size / 0.875))), T.CenterCrop(size)]
    return T.Compose(ops + [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def baseline_loader(
    root: str | os.PathLike,
    *,
    batch_size: int = 64,
    num_workers: int = 2,
    size: int = 224,
    train: bool = True,
    **kwargs: Any,
):
    """``DataLoader(ImageFolder(root, transform=baseline_transform(...)))``, shuffled when training."""
    import torch
    import torchvision

    ds = torchvision.datasets.ImageFolder(str(root), transform=baseline_transform(size, train=train))
    return torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        shuffle=train,
        num_workers=num_workers,
        drop_last=train,
        persistent_workers=num_workers > 0,
        prefetch_factor=2 if num_workers > 0 else None,
        **kwargs,
    )
