"""torchport.data: a fast, deterministic input pipeline that feeds any backend.

Pack an ImageFolder into shards (``torchport data pack``), then train from them::

    from torchport.data import make_loader
    loader = make_loader("shards", batch_size=256, train=True, image_size=224, seed=0)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:        # normalised floats on the current device
            ...

Pieces: :mod:`~torchport.data.format` (shards), :mod:`~torchport.data.pack`,
:mod:`~torchport.data.augment` (per-sample RandomResizedCrop from (seed, epoch, index)),
:mod:`~torchport.data.decode` (libjpeg-turbo, DCT-scaled), :mod:`~torchport.data.dataset`,
:mod:`~torchport.data.sampler`, :mod:`~torchport.data.loader`, :mod:`~torchport.data.synth`
(the trainer's default dataset), :mod:`~torchport.data.photos` (realistic benchmark JPEGs),
:mod:`~torchport.data.baseline` (the PIL pipeline we measure against), :mod:`~torchport.data.bench`.
Importing this package imports neither torch nor numpy; names load on first use.
"""

from __future__ import annotations

from torchport._lazy import lazy_exports


_EXPORTS = {
    "make_loader": "torchport.data.loader",
    "Loader": "torchport.data.loader",
    "LoaderConfig": "torchport.data.loader",
    "open_dataset": "torchport.data.loader",
    "CorruptSampleWarning": "torchport.data.loader",
    "ShardDataset": "torchport.data.dataset",
    "ImageFolderDataset": "torchport.data.dataset",
    "AugmentConfig": "torchport.data.dataset",
    "EpochBatchSampler": "torchport.data.sampler",
    "ShardSet": "torchport.data.format",
    "pack": "torchport.data.pack",
    "pack_splits": "torchport.data.pack",
    "PackConfig": "torchport.data.pack",
    "rrc_params": "torchport.data.augment",
    "center_params": "torchport.data.augment",
    "make_dataset": "torchport.data.synth",
    "default_dataset": "torchport.data.synth",
    "make_photos": "torchport.data.photos",
    "DataError": "torchport.data.errors",
    "SourceError": "torchport.data.errors",
    "ShardFormatError": "torchport.data.errors",
    "ShardCorruptError": "torchport.data.errors",
    "ChecksumMismatchError": "torchport.data.errors",
    "CorruptSampleError": "torchport.data.errors",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
