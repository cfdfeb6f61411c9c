"""One step on two devices, op by op: the first ATen op whose results differ, and why.

The parity check (:mod:`torchport.checks.trace`) compares module outputs across processes and
platforms; this is its microscope for one process holding both devices (CPU and the emulated
npu, or CPU and a GPU): :func:`record_ops` runs ``fn(device)`` under a
``TorchDispatchMode`` that keeps every op's outputs (copied to the host) and a digest of its
inputs, and :func:`first_difference` aligns two such recordings and names the first op that
differs:

* ``kind="kernel"``: the op received bit-identical inputs on both devices and returned
  different bytes -- a different kernel, thread count or reduction order on one device;
* ``kind="input"``: the op's inputs already differed -- the difference was made by ops that
  only one side ran (listed in ``only_a`` / ``only_b``: a device-side normalisation, a fused
  op) or by code outside torch's ops (numpy), before this op;
* ``kind="returned"``: every recorded op agreed, but the values ``fn`` returned did not.

Device transfers and allocations (``_to_copy``, ``copy_``, ``empty*``, pinning, ``item()``)
exist on one side only by nature and are left out of the alignment; views (``select``, ``t``,
``permute`` ...) compute nothing, and may look at a buffer not written yet (a batch that numpy is
about to decode into), so they are left out too: their numbers are checked where an op reads them. Every output is kept, so
use it on small steps (a tiny model, a batch of 8): it is a diagnosis, not a monitor.

Example::

    def step(device):
        torch.manual_seed(0)
        model = tinycnn(4).to(device)
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        return loss, [p.grad for p in model.parameters()]

    diff = first_difference(record_ops(step, "cpu"), record_ops(step, accelerator))
    assert diff is None, diff.describe()
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from typing import Any, Callable

__all__ = ["OpRecord", "Recording", "OpDifference", "record_ops", "first_difference"]

#: ops that move or allocate memory: one device runs them where the other does not
_TRANSFER = ("aten._to_copy", "aten.copy_", "aten._copy_from", "aten._copy_from_and_resize", "aten._pin_memory",
             "aten.is_pinned", "aten.empty", "aten.empty_strided", "aten.empty_like", "aten.record_stream",
             "aten._local_scalar_dense", "aten.lift_fresh", "aten.lift_fresh_copy", "aten.detach", "aten.alias",
             "aten.set_", "aten.resize_", "aten._has_compatible_shallow_copy_type", "profiler.")
#: in-place ops that overwrite their first argument without reading it (often a fresh, uninitialised buffer)
_OVERWRITE = frozenset({"random_", "uniform_", "normal_", "bernoulli_", "exponential_", "geometric_", "cauchy_",
                        "log_normal_", "fill_", "zero_"})


@dataclasses.dataclass
class OpRecord:
    """One op as it ran: its name, its inputs' digests and metadata, its outputs (host copies)."""

    op: str
    inputs: list[tuple[str, tuple[int, ...], str]]   # (digest, shape, dtype) per tensor argument
    outputs: list[Any]                              # host copies of the tensor outputs
    digests: list[str] = dataclasses.field(default_factory=list)  # of the outputs, to find an input's producer


@dataclasses.dataclass
class Recording:
    """What :func:`record_ops` saw: the ops in execution order and the values ``fn`` returned."""

    device: str
    ops: list[OpRecord]
    returned: list[Any]
    external: dict[str, Any] = dataclasses.field(default_factory=dict)  # inputs no recorded op made, by digest


@dataclasses.dataclass
class OpDifference:
    """The first op that differs between two recordings (see the module docstring for ``kind``)."""

    kind: str
    op: str
    index_a: int
    index_b: int
    detail: str
    only_a: list[str] = dataclasses.field(default_factory=list)
    only_b: list[str] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        """One paragraph naming the op, the kind of difference and the ops only one side ran before it."""
        where = {"kernel": "same inputs, different outputs", "input": "its inputs already differ",
                 "returned": "every op agreed; the returned values differ"}[self.kind]
        text = f"first difference at {self.op} (op #{self.index_a} / #{self.index_b}): {where}; {self.detail}"
        if self.only_a or self.only_b:
            text += f"; ran only on the first device before it: {self.only_a or 'none'}, only on the second: {self.only_b or 'none'}"
        return text


def _digest(t: Any) -> str:
    import torch

    host = t.detach().to("cpu").contiguous().reshape(-1)
    raw = host.view(torch.uint8).numpy().tobytes() if host.numel() else b""
    return hashlib.blake2b(raw + f"{tuple(t.shape)}{t.dtype}".encode(), digest_size=12).hexdigest()


def _tensors(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _host_copy(t: Any) -> Any:
    return t.detach().to("cpu", copy=True)


def record_ops(fn: Callable[[Any], Any], device: Any) -> Recording:
    """Run ``fn(device)`` once, recording every ATen op (forward and backward) and what it returns.

    Args:
        fn: builds and runs the step on ``device`` (seed it inside, so both devices start alike).
        device: a ``torch.device`` or its string.

    Returns:
        A :class:`Recording` for :func:`first_difference`.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: list[OpRecord] = []
    made: set[str] = set()
    external: dict[str, Any] = {}

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func)
            if not name.startswith(_TRANSFER) and not getattr(func, "is_view", False):
                read = args[1:] if name.split(".")[1] in _OVERWRITE else args
                ins = []
                for t in _tensors((read, kwargs)):
                    ins.append((_digest(t), tuple(t.shape), str(t.dtype)))
                    if ins[-1][0] not in made and ins[-1][0] not in external:  # from numpy, a file, a view ...
                        external[ins[-1][0]] = _host_copy(t)
                outs = _tensors(out)
                ops.append(OpRecord(name, ins, [_host_copy(t) for t in outs], [_digest(t) for t in outs]))
                made.update(ops[-1].digests)
            return out

    with _Recorder():
        returned = fn(torch.device(device))
    return Recording(str(device), ops, [_host_copy(t) for t in _tensors(returned)], external)


def _compare(a: list[Any], b: list[Any]) -> str | None:
    """None when the tensors are bit-identical, else what differs first (shape, dtype, values)."""
    import torch

    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} tensors"
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"tensor {i}: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}"
        if x.is_floating_point() or x.is_complex():
            differ = ~((x == y) | (x.isnan() & y.isnan()))
        else:
            differ = x != y
        n = int(differ.sum())
        if n:
            text = f"tensor {i} {tuple(x.shape)} {x.dtype}: {n} of {x.numel()} elements differ"
            if x.is_floating_point():
                xd, yd = x.double(), y.double()
                ok = differ & xd.isfinite() & yd.isfinite()
                if ok.any():
                    gap = (xd - yd).abs()[ok]
                    rel = (gap / yd.abs()[ok].clamp_min(torch.finfo(x.dtype).tiny)).max()
                    text += f", max abs {gap.max().item():.3g}, max rel {rel.item():.3g}"
                if x.dtype in (torch.float32, torch.float16, torch.bfloat16) and ok.any():
                    ib = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[x.dtype]
                    ulps = (x[ok].view(ib).long() - y[ok].view(ib).long()).abs().max()
                    text += f", max {int(ulps)} ulp"
            return text
    return None


def _producer(rec: Recording, before: int, digest: str) -> tuple[str, Any | None]:
    """Who made the tensor with this digest (the newest op before ``before``), and its value."""
    for r in reversed(rec.ops[:before]):
        if digest in r.digests:
            return f"made by {r.op}", r.outputs[r.digests.index(digest)]
    return "made outside torch's ops", rec.external.get(digest)


def _input_story(a: Recording, i: int, b: Recording, j: int, k: int) -> str:
    """Where input ``k`` of the differing op came from on each side, and by how much the two differ."""
    (who_a, va), (who_b, vb) = _producer(a, i, a.ops[i].inputs[k][0]), _producer(b, j, b.ops[j].inputs[k][0])
    text = f"on the first device {who_a}, on the second {who_b}"
    if va is not None and vb is not None:
        text += ": " + (_compare([va], [vb]) or "same values").replace("tensor 0 ", "")
    return text


def first_difference(a: Recording, b: Recording) -> OpDifference | None:
    """Align two recordings by op name and return the first op that differs, or None when all agree.

    Ops present on one side only (not transfers: those are left out when recording) do not count as a
    difference by themselves; the last eight of them before the differing op are reported with it (the
    usual suspects when its inputs differ).
    """
    names_a, names_b = [r.op for r in a.ops], [r.op for r in b.ops]
    matcher = difflib.SequenceMatcher(a=names_a, b=names_b, autojunk=False)
    only_a: list[str] = []
    only_b: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            only_a += names_a[i1:i2]
            only_b += names_b[j1:j2]
            continue
        for i, j in zip(range(i1, i2), range(j1, j2)):
            ra, rb = a.ops[i], b.ops[j]
            detail = _compare(ra.outputs, rb.outputs)
            if detail is None:
                continue
            same_inputs = [x[0] for x in ra.inputs] == [y[0] for y in rb.inputs]
            if not same_inputs:
                k = next((n for n, (x, y) in enumerate(zip(ra.inputs, rb.inputs)) if x[0] != y[0]), None)
                detail = (f"input {k} {ra.inputs[k][1]} {ra.inputs[k][2]} differs ({_input_story(a, i, b, j, k)}); "
                          f"output {detail}" if k is not None else f"{len(ra.inputs)} vs {len(rb.inputs)} inputs; output {detail}")
            return OpDifference("kernel" if same_inputs else "input", ra.op, i, j, detail, only_a[-8:], only_b[-8:])
    detail = _compare(a.returned, b.returned)
    if detail is not None:
        return OpDifference("returned", "<returned>", len(a.ops), len(b.ops), detail, only_a[-8:], only_b[-8:])
    return None
