"""Targets for the check tests: the healthy built-in one and one seeded defect each.

Importable by spec (``checks_targets:<name>``) so that checks which start fresh processes
(checkpoint portability, distributed smoke) can rebuild them there.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import torch

from torchport.checks.builtin import NUM_CLASSES, SyntheticImages, build_tiny_loader, tiny_target
from torchport.models import twoconv


def _spec(name: str) -> str:
    return f"checks_targets:{name}"


def healthy():
    """The built-in tiny CNN target."""
    return dataclasses.replace(tiny_target(), spec=_spec("healthy"))


class Normalize(torch.nn.Module):
    """Defect: the mean is a plain tensor attribute, so ``model.to(device)`` leaves it on CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.full((1, 3, 1, 1), 0.5)

    def forward(self, x):
        return x - self.mean


def buffer_on_cpu():
    """Defect: a normalisation tensor that stays on CPU."""
    return dataclasses.replace(healthy(), build_model=lambda: torch.nn.Sequential(Normalize(), twoconv(NUM_CLASSES, dropout=0.1)),
                               spec=_spec("buffer_on_cpu"))


def _cpu_weighted_loss(device):
    return torch.nn.CrossEntropyLoss(weight=torch.linspace(0.5, 1.5, 10))  # defect: never moved to `device`


def loss_weight_on_cpu():
    """Defect: the loss's class weights stay on CPU."""
    return dataclasses.replace(healthy(), build_loss=_cpu_weighted_loss, spec=_spec("loss_weight_on_cpu"))


def _disabled_scaler(device):
    return torch.amp.GradScaler(device.type, enabled=False)  # defect: scaling off


def disabled_scaler():
    """Defect: the target's GradScaler is disabled."""
    return dataclasses.replace(healthy(), precision="fp16", build_scaler=_disabled_scaler, spec=_spec("disabled_scaler"))


class NumpyAugmented(SyntheticImages):
    """Augmentation drawn from numpy's global RNG (worker-seeded, not (seed, epoch, index)-seeded)."""

    def __getitem__(self, index):
        img, label = self.image(index)
        if np.random.rand() < 0.5:
            img = img.flip(-1)
        img = img + float(np.random.rand()) * 0.1
        return img, torch.tensor(label), torch.tensor(index)


def unseeded_worker_init(worker_id: int) -> None:
    """Defect: seeds the worker from the OS entropy pool."""
    np.random.seed(int.from_bytes(os.urandom(4), "little"))


def _unseeded_loader(spec):
    return build_tiny_loader(spec, worker_init_fn=unseeded_worker_init,
                             dataset=NumpyAugmented(64, seed=spec.seed, epoch=spec.epoch))


def unseeded_workers():
    """Defect: per-worker randomness from an unseeded source."""
    return dataclasses.replace(healthy(), build_loader=_unseeded_loader, spec=_spec("unseeded_workers"))


def _save_without_scaler(path, state):
    from torchport.runtime import checkpoint as ckpt

    ckpt.save(ckpt.capture(model=state.model, optimizer=state.optimizer, scheduler=state.scheduler,
                           progress={"step": state.step}), path)  # defect: amp/scaler not passed


def checkpoint_without_scaler():
    """Defect: the checkpoint omits the GradScaler state."""
    return dataclasses.replace(healthy(), save_checkpoint=_save_without_scaler, spec=_spec("checkpoint_without_scaler"))


def _save_device_tensors(path, state):
    torch.save({"model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
                "scaler": state.amp.state_dict(), "scheduler": state.scheduler.state_dict()}, path)  # defect: no .cpu()


def _load_mapped(path, state):
    blob = torch.load(path, map_location="cpu", weights_only=True)
    state.model.load_state_dict(blob["model"])
    state.optimizer.load_state_dict(blob["optimizer"])
    state.amp.load_state_dict(blob["scaler"])
    state.scheduler.load_state_dict(blob["scheduler"])


def checkpoint_with_device_tensors():
    """Defect: tensors saved where they live (device location tags in the file)."""
    return dataclasses.replace(healthy(), save_checkpoint=_save_device_tensors, load_checkpoint=_load_mapped,
                               spec=_spec("checkpoint_with_device_tensors"))


def find_problem(result, text: str):
    """The first warn/fail evidence whose what/where/measured mentions ``text`` (assert helper)."""
    for e in result.problems:
        if text in f"{e.what} {e.where} {e.measured}":
            return e
    raise AssertionError(f"no problem mentioning {text!r} in {result.name}: {result.summary}\n"
                         + "\n".join(f"  {e.status} {e.what} | {e.measured} | {e.where}" for e in result.evidence))
