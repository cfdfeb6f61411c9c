"""A replayable training trace: what the parity check records on platform A and on B.

:func:`run_trace` runs ``steps`` harness steps from given initial weights, with the
target's data (workers 0, fixed seed) and **deterministic dropout** (masks drawn on CPU
from ``(seed, step, call)``, so every platform drops the same units), and records:

* per step: loss, gradient norm, learning rate, loss scale, whether the step was taken;
* per batch: a SHA-256 of inputs and targets (the data hash);
* per module output (forward hooks, execution order): statistics at step 0, the full
  tensor at step 0 (size-capped), and ``sample`` fixed elements at every step;
* per parameter gradient: ``sample`` fixed elements at every step.

The samples let the replay localise the first diverging module at any step, not only
at step 0, without storing every activation of every step.

Limits: randomness other than dropout inside ``forward`` (stochastic depth drawn with
``torch.rand``) is not made deterministic; such models need it disabled for parity.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform as _platform
from pathlib import Path
from typing import Any, Callable

__all__ = ["Trace", "run_trace", "deterministic_dropout", "environment", "sidecar"]

SAMPLE = 256
FULL_BYTES = 64 * 2**20
FORMAT = "torchport-parity/1"


@dataclasses.dataclass(kw_only=True)
class Trace:
    """Everything one traced run measured (see module docstring)."""

    platform: str
    precision: str
    steps: int
    seed: int
    batch_size: int
    loss: list[float] = dataclasses.field(default_factory=list)
    grad_norm: list[float] = dataclasses.field(default_factory=list)
    lr: list[float | None] = dataclasses.field(default_factory=list)
    scale: list[float | None] = dataclasses.field(default_factory=list)
    stepped: list[bool] = dataclasses.field(default_factory=list)
    batch_hashes: list[str] = dataclasses.field(default_factory=list)
    order: list[str] = dataclasses.field(default_factory=list)
    stats0: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    samples: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    grads: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    full0: dict[str, Any] = dataclasses.field(default_factory=dict)
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)
    target: str = ""

    @property
    def data_hash(self) -> str:
        """SHA-256 over the per-batch hashes."""
        return hashlib.sha256("".join(self.batch_hashes).encode()).hexdigest()

    # -- files ---------------------------------------------------------------------
    def save(self, path: str | Path, *, extra: dict[str, Any] | None = None) -> dict[str, Path]:
        """Write ``path`` (JSON: metadata, curves, step-0 stats) and ``<stem>.trace.pt`` (samples, tensors).

        Returns:
            ``{"json": path, "trace": sidecar path}``.
        """
        import torch

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        trace_file = sidecar(path, "trace")
        torch.save({"samples": {k: torch.stack(v) for k, v in self.samples.items() if v},
                    "grads": {k: torch.stack(v) for k, v in self.grads.items() if v},
                    "full0": self.full0}, trace_file)
        doc = {"format": FORMAT, "target": self.target, "platform": self.platform, "precision": self.precision,
               "steps": self.steps, "seed": self.seed, "batch_size": self.batch_size,
               "environment": self.environment, "data_hash": self.data_hash, "batch_hashes": self.batch_hashes,
               "loss": self.loss, "grad_norm": self.grad_norm, "lr": self.lr, "scale": self.scale,
               "stepped": self.stepped, "modules": {"order": self.order, "step0": self.stats0},
               "files": {"trace": trace_file.name}}
        doc.update(extra or {})
        path.write_text(json.dumps(_finite(doc), indent=1))
        return {"json": path, "trace": trace_file}

    @classmethod
    def load(cls, path: str | Path) -> tuple["Trace", dict[str, Any]]:
        """Read a trace written by :meth:`save`; returns ``(trace, the raw JSON document)``."""
        import torch

        path = Path(path)
        doc = load_document(path)
        if doc.get("format") != FORMAT:
            raise ValueError(f"{path} is not a torchport parity reference (format {doc.get('format')!r}, "
                             f"expected {FORMAT!r}); write one with `torchport check --only parity --record {path.name}`")
        t = cls(platform=doc["platform"], precision=doc["precision"], steps=doc["steps"], seed=doc["seed"],
                batch_size=doc["batch_size"], loss=[_num(x) for x in doc["loss"]],
                grad_norm=[_num(x) for x in doc["grad_norm"]], lr=doc["lr"], scale=doc["scale"],
                stepped=doc["stepped"], batch_hashes=doc["batch_hashes"], order=doc["modules"]["order"],
                stats0=doc["modules"]["step0"], environment=doc.get("environment", {}), target=doc.get("target", ""))
        tf = sidecar_file(path, doc, "trace")
        if tf.is_file():
            from torchport.runtime.checkpoint import load as load_checkpoint

            # the checkpoint loader: weights_only, a refused pickle named (never run), one-line errors
            blob = load_checkpoint(tf)
            t.samples = {k: list(v.unbind(0)) for k, v in blob.get("samples", {}).items()}
            t.grads = {k: list(v.unbind(0)) for k, v in blob.get("grads", {}).items()}
            t.full0 = dict(blob.get("full0", {}))
        return t, doc


def sidecar(path: str | Path, kind: str) -> Path:
    """``ref.json`` -> ``ref.<kind>.pt`` beside it (``init`` weights, ``trace`` tensors)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{kind}.pt")


def load_document(path: str | Path) -> dict[str, Any]:
    """The JSON document of a reference recorded elsewhere, within :mod:`torchport._parse`'s size and depth
    limits; one that exceeds them (or is not JSON) is refused on purpose (CheckpointRefusedError, exit 5)."""
    from torchport._parse import ParseError, loads
    from torchport.runtime.checkpoint import CheckpointRefusedError

    try:
        doc = loads(Path(path).read_bytes(), fmt="json", what=f"parity reference {path}")
    except ParseError as exc:
        raise CheckpointRefusedError(f"{exc}; record it again with `torchport check --only parity --record FILE`") from None
    if not isinstance(doc, dict):
        raise CheckpointRefusedError(f"parity reference {path} holds a JSON {type(doc).__name__}, not an object; "
                                     "record it again with `torchport check --only parity --record FILE`")
    return doc


def sidecar_file(reference: str | Path, doc: dict[str, Any], kind: str) -> Path:
    """The ``kind`` sidecar a reference document names (``files.<kind>``), confined to the reference's folder.

    A reference comes from elsewhere (recorded on machine A): its ``files`` entries are data. A name that is
    absolute, has a directory part or ``..``, or resolves (symlinks followed) outside the folder is refused.

    Raises:
        ReferenceRefusedError: the name leads out of the reference's folder (exit 5, one line).
    """
    from torchport.runtime.checkpoint import CheckpointRefusedError

    reference = Path(reference)
    files = doc.get("files", {})
    name = files.get(kind, sidecar(reference, kind).name) if isinstance(files, dict) else None
    folder = reference.parent
    from torchport.paths import inside, plain_name

    bad = not plain_name(name) or not inside(folder / name, folder)
    if bad:
        raise CheckpointRefusedError(
            f"parity reference {reference}: files.{kind} {name!r} leads out of the reference's folder {folder} "
            "(an absolute path, a directory part, '..' or a symlink out); a reference names its sidecar files "
            "beside it -- record it again with `torchport check --only parity --record FILE`")
    return folder / name


def _num(x: Any) -> float:
    return float(x) if x is not None else float("nan")


def _finite(obj: Any) -> Any:
    """JSON has no NaN/Inf: write them as strings ("nan", "inf")."""
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def environment(device: Any) -> dict[str, Any]:
    """Platform facts stored with a reference: device, OS, Python, library versions, threads."""
    import torch

    from torchport.runtime.checkpoint import versions

    return {"device": str(device), "backend": device.backend.name, "emulated": device.backend.emulated,
            "os": _platform.platform(), "machine": _platform.machine(), "python": _platform.python_version(),
            "torch_threads": torch.get_num_threads(), "versions": versions()}


# ----------------------------------------------------------------------------- dropout

_DROPOUT_NAMES = {"dropout": 0, "dropout1d": 1, "dropout2d": 2, "dropout3d": 3}


class deterministic_dropout:  # noqa: N801 - used like a function/context manager
    """Context manager: every dropout call draws its mask on CPU from ``(seed, step, call)``.

    Covers ``nn.Dropout*`` modules and ``F.dropout*`` / ``torch.dropout`` calls. Set
    :attr:`step` before each step; calls are numbered in execution order within a step.
    """

    def __init__(self, seed: int) -> None:
        self.seed, self.step, self.calls = seed, 0, 0
        self._mode: Any = None

    def start_step(self, step: int) -> None:
        """Begin numbering calls for ``step``."""
        self.step, self.calls = step, 0

    def __enter__(self) -> "deterministic_dropout":
        import torch
        import torch.nn.functional as F
        from torch.overrides import TorchFunctionMode

        funcs = {getattr(F, n): kind for n, kind in _DROPOUT_NAMES.items() if hasattr(F, n)}
        funcs[torch.dropout] = 0
        outer = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                kind = funcs.get(func)
                if kind is None:
                    return func(*args, **kwargs)
                return outer._apply(func, kind, args, kwargs)

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)

    def _apply(self, func: Any, kind: int, args: tuple, kwargs: dict) -> Any:
        import torch

        from torchport.checks.builtin import mix_seed

        names = ("input", "p", "train" if func is torch.dropout else "training", "inplace")
        bound = dict(zip(names, args))
        bound.update(kwargs)
        x, p = bound["input"], float(bound.get("p", 0.5))
        training = bool(bound.get("train", bound.get("training", True)))
        if not training or p == 0.0:
            return x
        self.calls += 1
        g = torch.Generator().manual_seed(mix_seed(self.seed, self.step, self.calls))
        shape = list(x.shape) if kind == 0 or x.dim() < 2 else list(x.shape[:2]) + [1] * (x.dim() - 2)
        keep = (torch.rand(shape, generator=g) >= p).to(device=x.device, dtype=x.dtype)
        factor = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
        if bound.get("inplace"):
            return x.mul_(keep).mul_(factor)
        return x * keep * factor


# ----------------------------------------------------------------------------- the traced run

def _hash_batch(inputs: Any, targets: Any) -> str:
    """First 16 hex digits of SHA-256 over shapes, dtypes and raw bytes of inputs and targets."""
    import torch

    h = hashlib.sha256()
    for t in (inputs, targets):
        t = t.detach().cpu().contiguous()
        h.update(f"{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _outputs(name: str, out: Any) -> list[tuple[str, Any]]:
    import torch

    if isinstance(out, torch.Tensor):
        return [(name, out)]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [(f"{name}[{i}]", t) for i, t in enumerate(out) if isinstance(t, torch.Tensor)]
    return []


def run_trace(target: Any, device: Any, init_state: dict[str, Any], *, steps: int, precision: str | None = None,
              seed: int | None = None, sample: int = SAMPLE, full_bytes: int = FULL_BYTES,
              on_step: Callable[[int, Any], None] | None = None) -> Trace:
    """Run ``steps`` traced harness steps of ``target`` on ``device`` from ``init_state`` weights.

    Args:
        target: a :class:`~torchport.checks.target.CheckTarget`.
        device: a torchport ``Target``.
        init_state: model ``state_dict`` (CPU) to start from -- the seed checkpoint.
        steps: steps to run.
        precision: override the target's precision.
        seed: data order / augmentation / dropout seed (default the target's).
        sample: elements sampled per module output and gradient per step.
        full_bytes: budget for full step-0 module outputs.
        on_step: ``(step, TrainState)`` called before each step (fault injection, perturbation).

    Returns:
        The :class:`Trace`.
    """
    import torch

    from torchport.checks.compare import sample_positions, tensor_stats
    from torchport.checks.target import LoaderSpec, build_state, iter_batches, split_batch, train_step
    from torchport.runtime.seed import seed_everything

    seed = target.seed if seed is None else seed
    seed_everything(seed)
    model = target.build_model()
    model.load_state_dict(init_state)
    state = build_state(target, device, precision=precision, model=model)
    trace = Trace(platform=str(device), precision=state.amp.precision, steps=steps, seed=seed,
                  batch_size=target.batch_size, environment=environment(device), target=target.name)
    positions: dict[str, Any] = {}
    budget = [full_bytes]
    step_box = [0]
    seen_this_step: dict[str, int] = {}

    def keep(key: str, t: Any) -> None:
        s = step_box[0]
        flat = t.detach().reshape(-1)
        pos = positions.get(key)
        if pos is None or (len(pos) and int(pos[-1]) >= flat.numel()):
            pos = positions[key] = sample_positions(flat.numel(), sample)
        trace.samples.setdefault(key, []).append(flat[pos.to(flat.device)].float().cpu())
        if s == 0:
            trace.order.append(key)
            trace.stats0[key] = tensor_stats(t)
            nbytes = t.numel() * 4
            if nbytes <= budget[0]:
                trace.full0[key] = t.detach().float().cpu().clone()
                budget[0] -= nbytes

    def make_hook(name: str):
        def hook(mod, args, out):
            for key, t in _outputs(name, out):
                n = seen_this_step.get(key, 0)
                seen_this_step[key] = n + 1
                keep(key if n == 0 else f"{key}#{n}", t)
        return hook

    handles = [m.register_forward_hook(make_hook(f"model.{n}" if n else "model")) for n, m in state.model.named_modules()]
    pnames = [(f"model.{n}", p) for n, p in state.model.named_parameters()]

    def grab_grads(st: Any) -> None:
        scale = st.amp.scaler.get_scale() if st.amp.scaler is not None and st.amp.scaler.is_enabled() else 1.0
        for name, p in pnames:
            if p.grad is None:
                continue
            flat = p.grad.detach().reshape(-1)
            pos = positions.setdefault("grad:" + name, sample_positions(flat.numel(), sample))
            trace.grads.setdefault(name, []).append((flat[pos.to(flat.device)].float() / scale).cpu())

    dropout = deterministic_dropout(seed)
    was_det = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with dropout:
            for s, batch in enumerate(iter_batches(target, LoaderSpec(seed=seed, batch_size=target.batch_size), steps)):
                inputs, targets, _ = split_batch(batch)
                trace.batch_hashes.append(_hash_batch(inputs, targets))
                step_box[0] = s
                seen_this_step.clear()
                dropout.start_step(s)
                if on_step is not None:
                    on_step(s, state)
                out = train_step(state, batch, before_step=grab_grads)
                trace.loss.append(out.loss)
                trace.grad_norm.append(out.grad_norm)
                trace.lr.append(out.lr)
                trace.scale.append(out.scale)
                trace.stepped.append(out.stepped)
    finally:
        torch.use_deterministic_algorithms(was_det)
        for h in handles:
            h.remove()
    return trace
