"""The pipelines ``torchport data bench`` compares against (what a user would pick instead).

Each builder returns an iterable of ``(images, labels)`` -- normalised float32 ``(B, 3, S, S)``
CPU tensors -- doing the same work as torchport's loader: RandomResizedCrop(S) + horizontal
flip + normalise, from the same JPEG files, with the same CPU budget (``workers`` DataLoader
worker processes, or ``workers`` DALI threads).

* ``pil`` -- ``torchvision.datasets.ImageFolder`` + PIL + the classic transforms
  (:mod:`torchport.data.baseline`).
* ``torchvision-io`` -- ``torchvision.io.decode_jpeg`` (libjpeg-turbo, CPU) on the file bytes,
  then ``transforms.v2`` per sample on uint8 tensors, default collate.
* ``dali`` -- NVIDIA DALI on the CPU only (``device_id=None``) in its fastest CPU configuration, the one
  DALI's own ResNet-50 example uses: ``fn.readers.file`` + ``fn.decoders.image_random_crop`` (the fused
  region-of-interest decode: only the random crop's window is decoded) + ``fn.resize`` to S x S +
  ``fn.crop_mirror_normalize`` (float CHW, random mirror), read through ``DALIGenericIterator``. Needs
  ``nvidia-dali-cuda120`` (the ``bench`` extra); never needed by the package or its tests.

Example::

    loader = build_baseline("torchvision-io", root, batch_size=64, workers=2, image_size=224)
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Any

__all__ = ["BASELINES", "REQUIRES", "missing_baselines", "build_baseline"]

BASELINES = ("pil", "dali", "torchvision-io")
#: baseline -> (module that must be importable, how to get it)
REQUIRES = {
    "pil": ("torchvision", "pip install torchvision"),
    "torchvision-io": ("torchvision", "pip install torchvision"),
    "dali": ("nvidia.dali", "pip install 'torchport[bench]' (nvidia-dali-cuda120)"),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def missing_baselines(names) -> dict[str, str]:
    """``{name: one-line reason}`` for every requested baseline whose package is not installed."""
    out = {}
    for n in names:
        module, hint = REQUIRES[n]
        if not _importable(module):
            out[n] = f"{n}: `{module}` is not installed ({hint}); skipped"
    return out


class _TvIoDataset:
    """ImageFolder files -> ``decode_jpeg`` -> ``transforms.v2`` (per sample), as the torchvision docs suggest."""

    def __init__(self, root: str, size: int) -> None:
        import torch
        import torchvision
        from torchvision.transforms import v2

        from torchport.data.augment import IMAGENET_MEAN, IMAGENET_STD

        self.items = torchvision.datasets.ImageFolder(str(root)).samples
        self.tf = v2.Compose([
            v2.RandomResizedCrop(size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ])

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        from torchvision.io import ImageReadMode, decode_jpeg, read_file

        path, label = self.items[i]
        with warnings.catch_warnings():  # torchvision >= 0.29 flags its image codecs as deprecated (torchcodec)
            warnings.simplefilter("ignore", DeprecationWarning)
            img = decode_jpeg(read_file(path), mode=ImageReadMode.RGB)  # (3, H, W) uint8
        return self.tf(img), label


class _DaliLoader:
    """DALI CPU pipeline behind its PyTorch iterator; yields ``(images, labels)`` like the others."""

    def __init__(self, root: str, batch_size: int, threads: int, size: int, seed: int = 0) -> None:
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        from torchport.data.augment import IMAGENET_MEAN, IMAGENET_STD

        mean = [255 * m for m in IMAGENET_MEAN]
        std = [255 * s for s in IMAGENET_STD]

        @pipeline_def(batch_size=batch_size, num_threads=max(1, threads), device_id=None, seed=seed)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True, name="Reader")
            # fused ROI decode: decodes only the RandomResizedCrop window (same area/aspect ranges as
            # torchvision's RandomResizedCrop), then resizes it -- DALI's fastest CPU path
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4.0 / 3.0],
                                                   num_attempts=100)
            images = fn.resize(images, resize_x=size, resize_y=size)
            images = fn.crop_mirror_normalize(
                images, dtype=types.FLOAT, output_layout="CHW", mean=mean, std=std,
                mirror=fn.random.coin_flip(probability=0.5),
            )
            return images, labels

        p = pipe()
        p.build()
        self._it = DALIGenericIterator(
            p, ["images", "labels"], reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
        )

    def __iter__(self):
        for out in self._it:
            yield out[0]["images"], out[0]["labels"].view(-1).long()


def build_baseline(name: str, root: str | os.PathLike, *, batch_size: int, workers: int, image_size: int) -> Any:
    """An iterable of normalised float32 ``(images, labels)`` batches for baseline ``name``."""
    if name == "pil":
        from torchport.data.baseline import baseline_loader

        return baseline_loader(root, batch_size=batch_size, num_workers=workers, size=image_size)
    if name == "torchvision-io":
        import torch

        return torch.utils.data.DataLoader(
            _TvIoDataset(str(root), image_size), batch_size=batch_size, shuffle=True, num_workers=workers,
            drop_last=True, persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None,
        )
    if name == "dali":
        return _DaliLoader(str(root), batch_size, workers, image_size)
    raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
