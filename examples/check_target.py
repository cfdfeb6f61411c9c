"""A complete ``torchport check`` target: how to put your own training code under the checks.

Run every check against it from the repository root::

    torchport check --target examples.check_target:target
    torchport check --target examples.check_target:target --only audit,amp -o check.html
    TORCHPORT_EMULATE=npu torchport check --target examples.check_target:target     # the NPU path
    torchport check --target examples.check_target:target --only parity --record ref.json      # platform A
    torchport check --target examples.check_target:target --only parity --reference ref.json   # platform B

or from Python::

    from torchport.checks import run_checks
    report = run_checks("examples.check_target:target", only=["audit", "data"])

The protocol
------------
``--target package.module:factory`` imports ``package.module`` (the working directory is on
the import path) and calls ``factory()``. It returns a :class:`torchport.checks.CheckTarget`:
a name plus a handful of *factories*. The checks call them as often as they need fresh
objects -- a parity replay, a resumed run in another process, each rank of the distributed
smoke test -- so they must build everything from scratch every time, deterministically:

=====================  =====================================================================
``build_model()``      the model **on CPU**; weights from the torch RNG (the checks seed it).
                       The checks move it with ``model.to(device)`` -- exactly what your
                       training script should do, so keep every tensor the model uses in
                       parameters or ``register_buffer`` buffers.
``build_loss(device)`` a callable ``(outputs, targets) -> scalar loss``; place its own tensors
                       (class weights ...) on ``device`` yourself, as your script must.
``build_loader(spec)`` an iterable of batches for one epoch described by a
                       :class:`~torchport.checks.LoaderSpec` (seed, epoch, rank, world_size,
                       num_workers, batch_size). A batch is ``(inputs, targets)`` or
                       ``(inputs, targets, indices)``; with indices the data check can report
                       sample order, not only pixels.
``build_optimizer``    ``(parameters) -> torch.optim.Optimizer``.
``build_scheduler``    optional ``(optimizer) -> LR scheduler``; stepped once per *taken* step.
``build_scaler``       optional ``(torchport Target) -> GradScaler``; default: torchport's AMP
                       policy (fp16 gets dynamic loss scaling where the backend needs it).
``precision``          ``"fp32"``, ``"fp16"``, ``"bf16"`` or ``"auto"``.
``save_checkpoint``    optional ``(path, TrainState)``; default: torchport's portable format.
``load_checkpoint``    optional ``(path, TrainState)`` restoring model, optimizer, scaler
                       (``state.amp``), scheduler and RNG in place.
``spec``               set automatically from ``--target``; checks that start fresh processes
                       (checkpoint portability, distributed smoke) re-import the target with it.
=====================  =====================================================================

The loop the checks drive (:func:`torchport.checks.target.train_step`) is the usual one:
forward and loss under ``amp.autocast()``, scaled backward, optimizer step through the scaler
(skipped on overflow), scheduler step only after a taken step.

What makes this example pass
----------------------------
* the normalisation constants are buffers, so ``.to(device)`` moves them (device audit);
* the class weights are moved to ``device`` in ``build_loss`` (device audit);
* every random choice of the augmentation comes from a generator seeded with
  ``(seed, epoch, index)`` -- never from a worker's RNG -- so any ``num_workers`` gives the same
  pixels, and the sampler shuffles with ``(seed, epoch)`` and splits by rank (data determinism);
* the checkpoint functions save CPU copies, including the scaler state and every RNG
  (checkpoint portability) -- shown here explicitly although the default would do the same.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from torchport.checks import CheckTarget, LoaderSpec

NUM_CLASSES = 5
SIDE = 24


class Stripes(Dataset):
    """Synthetic 3x24x24 images: class ``k`` has stripes every ``k + 2`` pixels, plus noise.

    Augmentation (random shift + horizontal flip) is drawn from a generator seeded with
    ``(seed, epoch, index)``: deterministic per sample, whatever process produces it.
    """

    def __init__(self, length: int, *, seed: int, epoch: int) -> None:
        self.length, self.seed, self.epoch = length, seed, epoch

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        label = index % NUM_CLASSES
        base = torch.Generator().manual_seed(index)  # the image itself depends on the index only
        img = torch.rand(3, SIDE, SIDE, generator=base) * 0.3
        img[:, :, :: label + 2] += 0.7
        aug = torch.Generator().manual_seed(hash((self.seed, self.epoch, index)) % 2**63)  # ints hash stably
        shift = int(torch.randint(-2, 3, (), generator=aug))
        img = torch.roll(img, shifts=shift, dims=2)
        if bool(torch.rand((), generator=aug) < 0.5):
            img = img.flip(-1)
        return img, torch.tensor(label), torch.tensor(index)


class Net(nn.Module):
    """Normalise, two conv blocks, dropout, linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.45, 0.45, 0.45]).view(1, 3, 1, 1))  # moves with .to()
        self.register_buffer("std", torch.tensor([0.25, 0.25, 0.25]).view(1, 3, 1, 1))
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, NUM_CLASSES))

    def forward(self, x):
        return self.head(self.features((x - self.mean) / self.std))


def build_loss(device):
    weight = torch.tensor([1.0, 1.0, 1.5, 1.0, 0.8])
    return nn.CrossEntropyLoss(weight=weight.to(device), label_smoothing=0.05)


def build_loader(spec: LoaderSpec):
    dataset = Stripes(80, seed=spec.seed, epoch=spec.epoch)
    sampler = DistributedSampler(dataset, num_replicas=spec.world_size, rank=spec.rank, shuffle=True,
                                 seed=spec.seed, drop_last=True)
    sampler.set_epoch(spec.epoch)  # a new order every epoch
    return DataLoader(dataset, batch_size=spec.batch_size, sampler=sampler, num_workers=spec.num_workers,
                      drop_last=True)


def build_optimizer(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)


def build_scheduler(optimizer):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)


def save_checkpoint(path, state) -> None:
    """Everything a resume needs, as CPU tensors and plain data (loads with ``weights_only=True``)."""
    from torchport.runtime import checkpoint as ckpt

    ckpt.save(ckpt.capture(model=state.model, optimizer=state.optimizer, amp=state.amp, scheduler=state.scheduler,
                           progress={"step": state.step}), path)


def load_checkpoint(path, state) -> None:
    """Restore in place on whatever device ``state`` lives on (tensors are read onto CPU first)."""
    from torchport.runtime import checkpoint as ckpt

    progress = ckpt.restore(ckpt.load(path), model=state.model, optimizer=state.optimizer, amp=state.amp,
                            scheduler=state.scheduler)
    state.step = int(progress.get("step", 0))


def target() -> CheckTarget:
    """The factory named on the command line: ``--target examples.check_target:target``."""
    return CheckTarget(
        name="stripes-net (example)",
        build_model=Net,
        build_loss=build_loss,
        build_loader=build_loader,
        build_optimizer=build_optimizer,
        build_scheduler=build_scheduler,
        precision="fp32",
        batch_size=8,
        seed=0,
        save_checkpoint=save_checkpoint,
        load_checkpoint=load_checkpoint,
    )
