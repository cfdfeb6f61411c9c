"""The built-in check target: :func:`torchport.models.twoconv` on seeded synthetic images.

Chosen explicitly with ``--target torchport.checks.builtin:tiny_target`` (the default target is
the reference trainer). Small enough that every check runs in seconds on a laptop CPU, but
with the parts the checks look at: convolutions, batch norm (buffers), dropout,
a class-weighted loss, an LR scheduler and per-sample random augmentation.

Data determinism is built in the way the checks expect it: sample ``i`` is drawn
from a generator seeded with ``i`` and its augmentation (random crop + flip) from
one seeded with ``(seed, epoch, i)`` — never from a worker's RNG — so any worker
count gives the same pixels; the sampler shuffles with ``(seed, epoch)`` and
splits by rank.
"""

from __future__ import annotations

from typing import Any

from torchport.models import twoconv

__all__ = ["tiny_target", "SyntheticImages", "mix_seed", "build_tiny_loader"]

NUM_CLASSES = 10
IMAGE = 16
PAD = 2


def mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across platforms and Python versions)."""
    import numpy as np

    ss = np.random.SeedSequence([int(p) % 2**32 for p in parts])
    return int(ss.generate_state(1, dtype=np.uint64)[0] % 2**63)


class SyntheticImages:
    """``length`` seeded 3x16x16 images of 10 classes with per-sample seeded augmentation.

    Args:
        length: number of samples.
        seed: augmentation seed (the images themselves depend only on the index).
        epoch: mixed into the augmentation seed (set before building each epoch's loader).

    Returns (per item):
        ``(image float32 [3,16,16], label int64, index int64)``.
    """

    def __init__(self, length: int = 64, *, seed: int = 0, epoch: int = 0) -> None:
        self.length, self.seed, self.epoch = length, seed, epoch

    def __len__(self) -> int:
        return self.length

    def image(self, index: int):
        """The un-augmented image of sample ``index``: class-dependent stripes plus noise."""
        import torch

        g = torch.Generator().manual_seed(mix_seed(7, index))
        label = index % NUM_CLASSES
        img = torch.rand(3, IMAGE, IMAGE, generator=g) * 0.5
        img[label % 3, :, label::NUM_CLASSES // 2] += 0.8  # a pattern the CNN can learn
        return img, label

    def __getitem__(self, index: int):
        import torch

        img, label = self.image(index)
        g = torch.Generator().manual_seed(mix_seed(self.seed, self.epoch, index))
        padded = torch.nn.functional.pad(img, (PAD, PAD, PAD, PAD), mode="reflect")
        top, left = (int(v) for v in torch.randint(0, 2 * PAD + 1, (2,), generator=g))
        img = padded[:, top:top + IMAGE, left:left + IMAGE]
        if bool(torch.rand((), generator=g) < 0.5):
            img = img.flip(-1)
        return img.contiguous(), torch.tensor(label), torch.tensor(index)


def build_tiny_loader(spec: Any, *, length: int = 64, worker_init_fn: Any = None, dataset: Any = None):
    """A DataLoader over :class:`SyntheticImages` for one :class:`~torchport.checks.target.LoaderSpec`.

    The sampler is torch's ``DistributedSampler`` (rank split, ``set_epoch`` reshuffles);
    ``drop_last`` keeps batch shapes fixed.
    """
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    ds = dataset if dataset is not None else SyntheticImages(length, seed=spec.seed, epoch=spec.epoch)
    sampler = DistributedSampler(ds, num_replicas=spec.world_size, rank=spec.rank, shuffle=True, seed=spec.seed,
                                 drop_last=True)
    sampler.set_epoch(spec.epoch)
    return DataLoader(ds, batch_size=spec.batch_size, sampler=sampler, num_workers=spec.num_workers,
                      worker_init_fn=worker_init_fn, drop_last=True,
                      generator=torch.Generator().manual_seed(spec.seed))


def tiny_target(*, precision: str = "fp32", length: int = 64, batch_size: int = 8, lr: float = 0.05):
    """The built-in :class:`~torchport.checks.target.CheckTarget` (``torchport.checks.builtin:tiny_target``)."""
    from torchport.checks.target import CheckTarget

    def build_loss(device):
        import torch

        weight = torch.linspace(0.5, 1.5, NUM_CLASSES)  # class weights: a loss tensor that must follow the device
        return torch.nn.CrossEntropyLoss(weight=weight).to(device)

    def build_optimizer(params):
        import torch

        return torch.optim.SGD(params, lr=lr, momentum=0.9)

    def build_scheduler(opt):
        import torch

        return torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.9)

    return CheckTarget(
        name="tiny-cnn",
        build_model=lambda: twoconv(NUM_CLASSES, dropout=0.1),
        build_loss=build_loss,
        build_loader=lambda spec: build_tiny_loader(spec, length=length),
        build_optimizer=build_optimizer,
        build_scheduler=build_scheduler,
        precision=precision,
        batch_size=batch_size,
        spec="torchport.checks.builtin:tiny_target",
    )
