"""Equivalence probe, loaded at interpreter start by tools/migrate_corpus.py (PYTHONPATH=this folder).

Only active when TORCHPORT_EQUIV_OUT names a folder. Seeds Python, NumPy and torch; records per optimizer
step the loss values that were back-propagated, the dtypes of the forward outputs of parameterised leaf
modules, the devices of the optimizer's parameters, whether the step changed the weights and a digest of the
host random generators (torch's CPU generator, Python's, NumPy's); appends one JSON line per step to
``<out>/<pid>.jsonl``; exits the process after TORCHPORT_EQUIV_STEPS steps.

Every ``torch.save`` is recorded too (``<out>/<pid>.saves.jsonl``): the file, and the object passed -- dict
keys in order, tensors' dtype / shape / device / a digest of their values, modules by type with their
``state_dict``, other objects by type and attributes -- plus the tensors' devices after loading the file back.
The harness compares those, and the files each mode wrote, between ``run`` and ``fix``.
This is harness code: it patches torch on purpose, in the processes the harness starts, never on import
of torchport.
"""

import hashlib
import json
import os

_OUT = os.environ.get("TORCHPORT_EQUIV_OUT")
#: how many elements of a list / keys of a dict a saved-object summary keeps (checkpoints are small here)
_MAX_ITEMS = 2000


def summarize(obj, torch, depth=0):
    """A JSON-able description of what ``torch.save`` was given (what a later ``torch.load`` sees)."""
    if depth > 12:
        return {"type": type(obj).__name__, "deep": True}
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        host = t.to("cpu", copy=True).contiguous() if t.layout == torch.strided else t.to_dense().cpu()
        flat = host.reshape(-1)
        raw = flat.view(torch.uint8) if flat.numel() and flat.dtype != torch.bool else flat.to(torch.uint8)
        digest = hashlib.sha1(raw.numpy().tobytes()).hexdigest()[:16]
        total = float((host.abs() if host.is_complex() else host).double().sum())
        return {"tensor": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "device": str(t.device),
                "sha": digest, "sum": total if total == total else "nan"}
    if isinstance(obj, torch.nn.Module):
        return {"module": type(obj).__name__, "state_dict": summarize(obj.state_dict(), torch, depth + 1)}
    if isinstance(obj, dict):
        keys = list(obj)[:_MAX_ITEMS]
        return {"dict": type(obj).__name__, "keys": [str(k) for k in keys],
                "values": [summarize(obj[k], torch, depth + 1) for k in keys]}
    if isinstance(obj, (list, tuple)):
        return {type(obj).__name__: [summarize(v, torch, depth + 1) for v in list(obj)[:_MAX_ITEMS]]}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj else "nan"
    if isinstance(obj, (torch.dtype, torch.device)):
        return {type(obj).__name__: str(obj)}
    try:
        import numpy as np

        if isinstance(obj, np.ndarray):
            return {"ndarray": str(obj.dtype), "shape": list(obj.shape),
                    "sha": hashlib.sha1(np.ascontiguousarray(obj).tobytes()).hexdigest()[:16]}
        if isinstance(obj, np.generic):
            return summarize(obj.item(), torch, depth + 1)
    except ImportError:  # pragma: no cover
        pass
    state_dict = getattr(obj, "state_dict", None)
    if callable(state_dict) and not isinstance(obj, type):  # an optimizer, a GradScaler, an LR scheduler
        try:
            return {"object": type(obj).__qualname__, "state_dict": summarize(state_dict(), torch, depth + 1)}
        except Exception:  # noqa: BLE001 - a state_dict that needs arguments: described by its attributes
            pass
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict) and not callable(obj):  # argparse.Namespace, a config object, a GradScaler ...
        return {"object": type(obj).__qualname__, "attrs": summarize(
            {k: v for k, v in attrs.items() if not k.startswith("__")}, torch, depth + 1)}
    return {"object": type(obj).__qualname__}


def _devices(obj, torch, out, depth=0):
    """The devices of every tensor in ``obj`` (what torch.load returned)."""
    if depth > 12:
        return out
    if isinstance(obj, torch.Tensor):
        out.add(str(obj.device))
    elif isinstance(obj, torch.nn.Module):
        _devices(obj.state_dict(), torch, out, depth + 1)
    elif isinstance(obj, dict):
        for v in obj.values():
            _devices(v, torch, out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _devices(v, torch, out, depth + 1)
    return out


def _file_name(f) -> str:
    """Where torch.save wrote: the path relative to the working folder (``orig/`` and ``fixed/``, the two
    copies of the script's folder, both become ``<script>/``; the process id, which some scripts put in a
    name, becomes ``<pid>``, a ``tempfile.mkdtemp()`` folder ``<tmp>``), or ``<stream>``."""
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
    if not isinstance(name, str):
        return "<stream>"
    import re

    rel = os.path.relpath(os.path.abspath(name)).replace(str(os.getpid()), "<pid>")
    rel = re.sub(r"(^|[\\/])tmp[a-z0-9_]{8}(?=$|[\\/])", r"\1<tmp>", rel)  # tempfile.mkdtemp() folders
    first, _, rest = rel.partition(os.sep)
    return f"<script>{os.sep}{rest}" if first in ("orig", "fixed") and rest else rel


def rng_digest(torch) -> str:
    """A digest of the host generators: torch's CPU generator, Python's and NumPy's global ones."""
    import random

    h = hashlib.sha1(torch.get_rng_state().numpy().tobytes())
    h.update(repr(random.getstate()).encode())
    try:
        import numpy as np

        h.update(repr(np.random.get_state()[1].tolist()[:8]).encode() + str(np.random.get_state()[2]).encode())
    except ImportError:  # pragma: no cover
        pass
    return h.hexdigest()[:16]


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
                  "dtypes": sorted(state["dtypes"]), "devices": devices, "changed": changed,
                  "rng": rng_digest(torch)}
        state["losses"], state["dtypes"] = [], set()
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if state["steps"] >= steps_max:
            os._exit(0)  # enough steps: every rank stops at the same step, so no collective is left waiting

    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(pre_hook)
    register_optimizer_step_post_hook(post_hook)

    orig_save = torch.save
    saves = os.path.join(out, f"{os.getpid()}.saves.jsonl")

    def save(obj, f, *args, **kwargs):
        result = orig_save(obj, f, *args, **kwargs)
        record = {"pid": os.getpid(), "rank": rank(), "step": state["steps"], "file": _file_name(f),
                  "object": summarize(obj, torch)}
        if isinstance(f, (str, os.PathLike)):
            try:
                record["loaded_devices"] = sorted(_devices(torch.load(f, weights_only=False), torch, set()))
            except Exception as exc:  # noqa: BLE001 - what the load said is the record
                record["loaded_devices"] = f"load failed: {type(exc).__name__}"
        with open(saves, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        return result

    save.__wrapped__ = orig_save
    torch.save = save


def _fake_datasets() -> None:
    """TORCHPORT_EQUIV_FAKE_DATA=1: torchvision's downloading datasets become small generated ones (same
    image shape and mode, deterministic), so third-party scripts run without network or data."""
    import torch
    import torchvision
    from torchvision import datasets

    _SIZE = int(os.environ.get("TORCHPORT_EQUIV_FAKE_SIZE", "64"))  # images per generated dataset
    shapes = {"MNIST": (1, 28, 28), "FashionMNIST": (1, 28, 28), "EMNIST": (1, 28, 28), "KMNIST": (1, 28, 28),
              "CIFAR10": (3, 32, 32), "CIFAR100": (3, 32, 32), "SVHN": (3, 32, 32), "ImageFolder": (3, 64, 64)}
    for name, shape in shapes.items():
        classes = 100 if name == "CIFAR100" else 10

        class Fake(datasets.FakeData):
            def __init__(self, *args, transform=None, target_transform=None, _shape=shape, _classes=classes,
                         **kwargs):
                if transform is None:  # ImageFolder(root, transform) / MNIST(root, train, transform) positionally
                    transform = next((a for a in args[1:] if callable(a)), None)
                super().__init__(size=_SIZE, image_size=_shape, num_classes=_classes, transform=transform,
                                 target_transform=target_transform)
                # the raw arrays some scripts index directly (MNIST's uint8 N x H x W `.data`, `.targets`)
                g = torch.Generator().manual_seed(1)
                raw = torch.randint(0, 256, (_SIZE, *_shape[1:]) if _shape[0] == 1 else (_SIZE, *_shape[1:], _shape[0]),
                                    dtype=torch.uint8, generator=g)
                self.data, self.targets = raw, torch.randint(0, _classes, (_SIZE,), generator=g)

        Fake.__name__ = name
        setattr(datasets, name, Fake)
    torchvision.datasets = datasets


if _OUT:
    _install(_OUT)
    if os.environ.get("TORCHPORT_EQUIV_FAKE_DATA") == "1":
        _fake_datasets()
