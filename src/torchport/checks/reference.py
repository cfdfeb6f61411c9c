"""The reference trainer as a check target: ``torchport.checks.reference:trainer_target``.

Built from the trainer's own parts -- :func:`torchport.train.build_model`,
:func:`torchport.train.optim.build_optimizer` with its warmup + cosine
:class:`~torchport.train.optim.LrSchedule`, label-smoothed cross-entropy, and the fast
:mod:`torchport.data` loader over the trainer's synthetic shapes dataset (per-sample
augmentation from ``(seed, epoch, index)``, rank-split ``set_epoch`` sampler) -- at a size
that keeps every check in seconds: ``tinycnn`` on 32x32 crops of a small cached copy of the
dataset.

This is what ``torchport check`` runs without ``--target``. Pass ``model="resnet18"`` (and a
bigger ``image_size``) to check a real architecture.
"""

from __future__ import annotations

from typing import Any

__all__ = ["trainer_target"]

#: a small variant of the trainer's default dataset, generated once into the cache
DATASET = {"train_per_class": 16, "val_per_class": 2, "size": 40}


class _Params:
    """What the trainer's ``build_optimizer(model, ...)`` reads from a model: ``parameters()``."""

    def __init__(self, params: Any) -> None:
        self._params = list(params)

    def parameters(self):
        return iter(self._params)


def trainer_target(*, model: str = "tinycnn", image_size: int = 32, batch_size: int = 16, precision: str = "fp32",
                   data: str | None = None, lr: float = 0.05, seed: int = 0):
    """The reference trainer's model, loss, optimizer, LR schedule and input pipeline as a CheckTarget.

    Args:
        model: a name :func:`torchport.train.build_model` accepts.
        image_size: training crop side.
        batch_size: samples per batch.
        precision: AMP precision for the checks.
        data: an ImageFolder / shard directory (default: a small cached synthetic dataset).
        lr: peak learning rate.
        seed: weights / data order / augmentation seed.
    """
    from torchport.checks.target import CheckTarget

    state: dict[str, Any] = {}

    def root() -> str:
        if "root" not in state:
            from torchport.data import default_dataset

            state["root"] = str(data) if data else str(default_dataset(**DATASET))
        return state["root"]

    def num_classes() -> int:
        if "classes" not in state:
            from pathlib import Path

            train = Path(root()) / "train"
            state["classes"] = sum(1 for p in train.iterdir() if p.is_dir()) if train.is_dir() else 10
        return state["classes"]

    def build_model():
        from torchport.train import build_model as build

        return build(model, num_classes=num_classes(), image_size=image_size)

    def build_loss(device):
        import torch

        return torch.nn.CrossEntropyLoss(label_smoothing=0.1).to(device)

    def build_loader(spec):
        from torchport import backends
        from torchport.data import make_loader
        from torchport.runtime.device import Target

        loader = make_loader(root(), batch_size=spec.batch_size, train=True, image_size=image_size, seed=spec.seed,
                             num_workers=spec.num_workers, rank=spec.rank, world_size=spec.world_size,
                             target=Target(backend=backends.get("cpu"), reason="argument"), return_indices=True,
                             reuse_buffers=False, persistent_workers=False)
        loader.set_epoch(spec.epoch)
        return loader

    def build_optimizer(params):
        from torchport.train.optim import build_optimizer as build

        return build(_Params(params), name="sgd", lr=lr, momentum=0.9, weight_decay=5e-4)

    def build_scheduler(optimizer):
        import torch

        from torchport.train.optim import LrSchedule

        return torch.optim.lr_scheduler.LambdaLR(optimizer, LrSchedule(kind="cosine", warmup=5, total=200))

    return CheckTarget(name=f"reference trainer ({model}, {image_size}px)", build_model=build_model,
                       build_loss=build_loss, build_loader=build_loader, build_optimizer=build_optimizer,
                       build_scheduler=build_scheduler, precision=precision, batch_size=batch_size, seed=seed,
                       spec="torchport.checks.reference:trainer_target")
