"""Equivalence probe, loaded at interpreter start by tools/migrate_corpus.py (PYTHONPATH=this folder).

Only active when TORCHPORT_EQUIV_OUT names a folder. Seeds Python, NumPy and torch; records per optimizer
step the loss values that were back-propagated, the dtypes of the forward outputs of parameterised leaf
modules, the devices of the optimizer's parameters and whether the step changed the weights; appends one
JSON line per step to ``<out>/<pid>.jsonl``; exits the process after TORCHPORT_EQUIV_STEPS steps.
This is harness code: it patches torch on purpose, in the processes the harness starts, never on import
of torchport.
"""

import json
import os

_OUT = os.environ.get("TORCHPORT_EQUIV_OUT")


def _install(out: str) -> None:
    import random

    import torch

    steps_max = int(os.environ.get("TORCHPORT_EQUIV_STEPS", "3"))
    seed = int(os.environ.get("TORCHPORT_EQUIV_SEED", "0"))
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass
    torch.manual_seed(seed)
    state = {"losses": [], "dtypes": set(), "steps": 0, "before": None}
    path = os.path.join(out, f"{os.getpid()}.jsonl")

    def rank() -> int:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return int(os.environ.get("RANK", "0"))

    orig_backward = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        if self.numel() == 1:
            unscaled = getattr(self, "_equiv_unscaled", None)
            state["losses"].append(unscaled if unscaled is not None else float(self.detach().float().cpu().reshape(())))
        return orig_backward(self, *args, **kwargs)

    torch.Tensor.backward = backward

    # The loss is what the script optimises, not the GradScaler's multiple of it: a script that scales on
    # one side only (timm makes its scaler only when device.type == "cuda") trains the same objective.
    from torch.amp import GradScaler

    orig_scale = GradScaler.scale

    def scale(self, outputs):
        scaled = orig_scale(self, outputs)
        if isinstance(outputs, torch.Tensor) and scaled is not outputs and outputs.numel() == 1:
            scaled._equiv_unscaled = float(outputs.detach().float().cpu().reshape(()))
        return scaled

    GradScaler.scale = scale

    def forward_hook(module, inputs, output):
        # a DataParallel replica holds its weights as plain attributes, listed in _former_parameters
        if isinstance(output, torch.Tensor) and output.is_floating_point() and not list(module.children()) \
                and (any(True for _ in module.parameters(recurse=False))
                     or any(p is not None for p in getattr(module, "_former_parameters", {}).values())):
            state["dtypes"].add(str(output.dtype).replace("torch.", ""))

    torch.nn.modules.module.register_module_forward_hook(forward_hook)

    def params(opt):
        return [p for group in opt.param_groups for p in group["params"]]

    def pre_hook(opt, args, kwargs):
        state["before"] = [p.detach().to("cpu", copy=True) for p in params(opt)]

    def post_hook(opt, args, kwargs):
        before = state["before"] or []
        changed = any(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, params(opt)))
        devices = sorted({str(q.device) for g in opt.param_groups for q in g["params"]})
        state["steps"] += 1
        record = {"pid": os.getpid(), "rank": rank(), "step": state["steps"], "losses": state["losses"],
                  "dtypes": sorted(state["dtypes"]), "devices": devices, "changed": changed}
        state["losses"], state["dtypes"] = [], set()
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if state["steps"] >= steps_max:
            os._exit(0)  # enough steps: every rank stops at the same step, so no collective is left waiting

    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(pre_hook)
    register_optimizer_step_post_hook(post_hook)


def _fake_datasets() -> None:
    """TORCHPORT_EQUIV_FAKE_DATA=1: torchvision's downloading datasets become small generated ones (same
    image shape and mode, deterministic), so third-party scripts run without network or data."""
    import torch
    import torchvision
    from torchvision import datasets

    shapes = {"MNIST": (1, 28, 28), "FashionMNIST": (1, 28, 28), "EMNIST": (1, 28, 28), "KMNIST": (1, 28, 28),
              "CIFAR10": (3, 32, 32), "CIFAR100": (3, 32, 32), "SVHN": (3, 32, 32), "ImageFolder": (3, 64, 64)}
    for name, shape in shapes.items():
        classes = 100 if name == "CIFAR100" else 10

        class Fake(datasets.FakeData):
            def __init__(self, *args, transform=None, target_transform=None, _shape=shape, _classes=classes,
                         **kwargs):
                if transform is None:  # ImageFolder(root, transform) / MNIST(root, train, transform) positionally
                    transform = next((a for a in args[1:] if callable(a)), None)
                super().__init__(size=64, image_size=_shape, num_classes=_classes, transform=transform,
                                 target_transform=target_transform)
                # the raw arrays some scripts index directly (MNIST's uint8 N x H x W `.data`, `.targets`)
                g = torch.Generator().manual_seed(1)
                raw = torch.randint(0, 256, (64, *_shape[1:]) if _shape[0] == 1 else (64, *_shape[1:], _shape[0]),
                                    dtype=torch.uint8, generator=g)
                self.data, self.targets = raw, torch.randint(0, _classes, (64,), generator=g)

        Fake.__name__ = name
        setattr(datasets, name, Fake)
    torchvision.datasets = datasets


if _OUT:
    _install(_OUT)
    if os.environ.get("TORCHPORT_EQUIV_FAKE_DATA") == "1":
        _fake_datasets()
