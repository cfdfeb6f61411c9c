"""Performance hazards of a training step, tied to the user's line: what will make the card slow.

A ``TorchDispatchMode`` watches every aten operator while the step runs (on the CPU or the emulated npu)
and records, per user line (the innermost frame of user code on the stack, as ``torchport run`` names it):

=================  ===========================================================================  =========
kind               what it sees                                                                 why slow
=================  ===========================================================================  =========
host-sync          ``.item()`` / ``float(t)`` / ``if t:`` (``_local_scalar_dense``), ``nonzero`` /  the host
                   ``masked_select`` / ``unique`` (the result's size needs the data), device ->   waits for
                   host copies (``.cpu()``, ``.tolist()``, ``.numpy()`` of device tensors)         the queue
cpu-fallback       operators with no kernel in Ascend's backend 2.14.0 (``_coverage.py``)       round trip
                   and their share of the operator time                                           to the CPU
shapes             an operator at a line meeting a new input shape in a later step than its first a compile
                                                                                                per shape
float64 / int64    float64 math; int64 arithmetic (all operands int64, not indexing)           no native
                                                                                                support
=================  ===========================================================================  =========

On the CPU nothing is slow yet -- the report predicts the card. Device -> host copies are only visible where
there is a device (the emulated npu): on the CPU ``.cpu()`` is no operator at all. Steps are counted by
optimizer steps (``torch.optim`` post-step hook); per-step figures divide by them.

Example::

    from torchport.profile.hazards import record_hazards
    with record_hazards() as rec:
        for batch in loader:
            train_step(batch)
    print(rec.report().to_text())
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import linecache
import os
import sys
import threading
import time
from typing import Any, Iterable, Iterator

__all__ = ["Hazard", "HazardReport", "HazardRecorder", "record_hazards", "FIXES", "write_hazards"]

#: the fix to consider, per kind (and per sync flavour)
FIXES = {
    "item": "keep the value on the device (accumulate losses as tensors; call .item() once per log interval)",
    "control-flow": "branch on Python values, or replace `if tensor:` by torch.where / a mask",
    "dynamic-shape": "use a fixed-shape form (a mask and torch.where, nonzero_static, or `size=`) instead of a "
                     "data-dependent size",
    "copy-to-host": "copy once per log interval, non_blocking into pinned memory, or keep the math on the device",
    "cpu-fallback": "replace the operator by supported ones (docs/emulator.md, CPU fallback) or move it out of the step",
    "shapes": "pad or bucket inputs to a few fixed shapes (each new shape is a compile in graph/jit mode); "
              "torchport.tune(jit_compile=False) turns off the per-shape operator compiles where the backend has them",
    "float64": "compute in float32 (.float(); numpy arrays arrive as float64: torch.from_numpy(a).float())",
    "int64": "use int32 where the range allows (the card's vector unit has no native int64 arithmetic)",
}
_SYNC_DYNAMIC = frozenset({"aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_dim",
                           "aten::unique_consecutive", "aten::repeat_interleave", "aten::_unique"})
_INT_OK = frozenset({"aten::_local_scalar_dense", "aten::copy_", "aten::_to_copy", "aten::index", "aten::index_select",
                     "aten::gather", "aten::scatter", "aten::scatter_", "aten::embedding", "aten::index_put_",
                     "aten::_index_put_impl_", "aten::lift_fresh", "aten::clone", "aten::empty_like", "aten::zeros_like",
                     "aten::ones_like", "aten::fill_", "aten::_pin_memory", "aten::pin_memory", "aten::is_pinned", "aten::zero_", "aten::set_", "aten::resize_", "aten::detach",
                     "aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::cat", "aten::stack"})


@dataclasses.dataclass
class Hazard:
    """One hazard at one user line (the record every renderer reads).

    Attributes:
        kind: ``host-sync``, ``cpu-fallback``, ``shapes``, ``float64`` or ``int64``.
        site: ``"train.py:42"`` (``(library)`` when no user code was on the stack).
        op: the aten operator (``"aten::_local_scalar_dense"``).
        flavour: what exactly (``item``, ``control-flow``, ``dynamic-shape``, ``copy-to-host``; else the kind).
        count: times seen.
        seconds: host time spent in the operator.
        shapes: distinct input shapes (``shapes`` hazards: those new after the first step).
        code: the source line, stripped.
    """

    kind: str
    site: str
    op: str
    flavour: str
    count: int = 0
    seconds: float = 0.0
    shapes: int = 0
    code: str = ""

    @property
    def fix(self) -> str:
        """The fix to consider."""
        return FIXES.get(self.flavour, FIXES.get(self.kind, ""))

    def to_dict(self, steps: int) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.update(fix=self.fix, per_step=self.count / max(steps, 1), seconds=round(self.seconds, 6))
        return d


@dataclasses.dataclass
class HazardReport:
    """All hazards of a run, with the totals the shares are taken from."""

    device: str
    steps: int
    op_seconds: float
    ops: int
    hazards: list[Hazard]
    distinct_shapes: dict[str, int]

    def by_kind(self, kind: str) -> list[Hazard]:
        """The hazards of ``kind``, worst first (count per step, then time)."""
        return sorted((h for h in self.hazards if h.kind == kind), key=lambda h: (-h.count, -h.seconds, h.site))

    def fallback_share(self) -> float:
        """CPU-fallback operators' share of the operator time."""
        return sum(h.seconds for h in self.hazards if h.kind == "cpu-fallback") / max(self.op_seconds, 1e-12)

    def top_lines(self, n: int = 5) -> list[tuple[str, int]]:
        """The user lines with the most hazard events, worst first."""
        per: dict[str, int] = {}
        for h in self.hazards:
            per[h.site] = per.get(h.site, 0) + h.count
        return sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def to_dict(self) -> dict[str, Any]:
        kinds = ("host-sync", "cpu-fallback", "shapes", "float64", "int64")
        return {"format": "torchport-hazards/1", "device": self.device, "steps": self.steps, "ops": self.ops,
                "op_seconds": round(self.op_seconds, 6), "cpu_fallback_share": round(self.fallback_share(), 6),
                "summary": {k: sum(h.count for h in self.hazards if h.kind == k) / max(self.steps, 1) for k in kinds},
                "top_lines": [{"site": s, "events": c} for s, c in self.top_lines()],
                "distinct_shapes": self.distinct_shapes,
                "hazards": [h.to_dict(self.steps) for k in kinds for h in self.by_kind(k)]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def to_text(self, limit: int = 8) -> str:
        s = max(self.steps, 1)
        lines = [f"hazards on {self.device}: {self.steps} step(s), {self.ops} operators, "
                 f"{self.op_seconds * 1e3:.1f} ms in operators"]
        for kind, title in (("host-sync", "host syncs"), ("cpu-fallback", "CPU-fallback operators"),
                            ("shapes", "new input shapes in later steps"), ("float64", "float64 work"),
                            ("int64", "int64 arithmetic")):
            rows = self.by_kind(kind)
            total = sum(h.count for h in rows)
            head = f"{title}: {total / s:.1f} per step" if kind != "shapes" else f"{title}: {total}"
            if kind == "cpu-fallback":
                head += f", {self.fallback_share() * 100:.1f}% of operator time"
            lines.append(head if rows else f"{title}: none")
            told: set = set()
            for h in rows[:limit]:
                what = (f"{h.shapes} new shapes ({h.op})" if kind == "shapes"
                        else f"{h.op} [{h.flavour}] x{h.count / s:.1f}/step, {h.seconds * 1e3:.2f} ms")
                lines.append(f"  {h.site}  {what}" + (f"  | {h.code}" if h.code else ""))
                if h.flavour not in told:
                    told.add(h.flavour)
                    lines.append(f"      fix: {h.fix}")
            if len(rows) > limit:
                lines.append(f"  ... {len(rows) - limit} more (JSON has all)")
        if self.hazards:
            lines.append("top lines: " + ", ".join(f"{site} ({n})" for site, n in self.top_lines()))
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        e = html.escape
        d = self.to_dict()
        parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>torchport hazards</title><style>"
                 "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
                 "padding:3px 6px;text-align:left;vertical-align:top}code{font-size:90%}</style></head><body>",
                 f"<h1>Performance hazards on {e(self.device)}</h1>",
                 f"<p>{self.steps} step(s), {self.ops} operators, {self.op_seconds * 1e3:.1f} ms in operators; "
                 f"CPU-fallback share {self.fallback_share() * 100:.1f}%</p>",
                 "<h2>Top lines</h2><ol>" + "".join(f"<li><code>{e(t['site'])}</code> ({t['events']})</li>"
                                                   for t in d["top_lines"]) + "</ol>",
                 "<table><tr><th>kind</th><th>what</th><th>line</th><th>code</th><th>op</th><th>per step</th>"
                 "<th>ms</th><th>new shapes</th><th>fix to consider</th></tr>"]
        for h in d["hazards"]:
            parts.append(f"<tr><td>{e(h['kind'])}</td><td>{e(h['flavour'])}</td><td><code>{e(h['site'])}</code></td>"
                         f"<td><code>{e(h['code'])}</code></td><td>{e(h['op'])}</td><td>{h['per_step']:.2f}</td>"
                         f"<td>{h['seconds'] * 1e3:.2f}</td><td>{h['shapes'] or ''}</td><td>{e(h['fix'])}</td></tr>")
        parts.append("</table></body></html>")
        return "\n".join(parts)


def _injected_fallbacks() -> frozenset:
    """Operators the emulator was told to treat as unsupported (``torchport.emulate.set_fallback_ops``)."""
    from torchport.emulate._state import STATE

    return STATE.fallback_ops if STATE.installed else frozenset()


def _emulator_installed() -> bool:
    from torchport.emulate._state import STATE

    return STATE.installed


_OPTIM_DIR = os.sep + os.path.join("torch", "optim") + os.sep


def _in_optimizer(depth: int = 16) -> bool:
    """True when a ``torch/optim`` frame is among the innermost ``depth`` frames (an optimizer's own read)."""
    f = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return False
        if _OPTIM_DIR in f.f_code.co_filename:
            return True
        f = f.f_back
    return False


def _shape_key(args: Iterable[Any]) -> tuple:
    import torch

    return tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))


class HazardRecorder:
    """Collects :class:`Hazard` records while active (use :func:`record_hazards`)."""

    def __init__(self, user_paths: Iterable[str] = (), device: str = "") -> None:
        from torchport.shim._callers import CallerClassifier

        self._callers = CallerClassifier(user_paths=user_paths)
        self._here = __file__
        self.device = device
        self.steps = 0
        self.op_seconds = 0.0
        self.ops = 0
        self._owner = threading.get_ident()
        self._hazards: dict[tuple, Hazard] = {}
        self._shapes: dict[str, set] = {}
        self._site_shapes: dict[tuple, set] = {}  # (line, op) -> input shapes seen there
        self._first_step: dict[tuple, int] = {}  # (line, op) -> the step it first ran in (later new shapes: hazards)
        self._fallback: dict[Any, bool] = {}

    # -- recording ----------------------------------------------------------------
    def _site(self) -> tuple[str, str]:
        f = sys._getframe(2)
        while f is not None and f.f_code.co_filename == self._here:
            f = f.f_back
        site = self._callers.first_user_site(f)
        if site.endswith("(library)") and threading.get_ident() != self._owner:
            # autograd's device threads run backward with no user frame: the recording thread waits in the
            # user's `loss.backward()` line meanwhile, so that is where the work comes from
            owner = sys._current_frames().get(self._owner)
            if owner is not None and self._callers.first_user_site(owner) != "<unknown>":
                f = owner
                site = self._callers.first_user_site(owner)
        code = ""
        if not site.endswith("(library)") and ":" in site:
            g = f
            while g is not None and not self._callers.is_user_file(g.f_code.co_filename):
                g = g.f_back
            if g is not None:
                code = linecache.getline(g.f_code.co_filename, g.f_lineno).strip()
        return site, code

    def _add(self, kind: str, op: str, flavour: str, seconds: float, shapes: int = 0) -> None:
        site, code = self._site()
        key = (kind, site, op, flavour)
        h = self._hazards.get(key)
        if h is None:
            h = self._hazards[key] = Hazard(kind, site, op, flavour, code=code)
        h.count += 1
        h.seconds += seconds
        h.shapes += shapes

    def _would_fall_back(self, func: Any) -> bool:
        hit = self._fallback.get(func)
        if hit is None and func._schema.name in _injected_fallbacks():
            hit = self._fallback[func] = True
        if hit is None:
            try:
                from torchport.emulate._coverage import would_fall_back

                hit = would_fall_back(func)
            except Exception:  # an op the metadata cannot answer for: not counted
                hit = False
            self._fallback[func] = hit
        return hit

    def observe(self, func: Any, args: tuple, kwargs: dict, out: Any, seconds: float) -> None:
        """Classify one operator call (called by the dispatch mode after the operator ran)."""
        import torch

        name = func._schema.name
        self.ops += 1
        self.op_seconds += seconds
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        # with a device present (the emulated npu) only reads of device tensors sync; on a CPU-only run every
        # read counts (the tensors a script moves to the card are not known), except torch.optim's step
        # counters, which torch keeps on the host by design (non-capturable, non-fused optimizers)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        all_t = tensors + [o for o in outs if isinstance(o, torch.Tensor)]
        on_device = any(t.device.type != "cpu" for t in all_t) if _emulator_installed() else True
        if name == "aten::_local_scalar_dense" and on_device and not _in_optimizer():
            self._add("host-sync", name, self._scalar_flavour(), seconds)
        elif name in _SYNC_DYNAMIC and on_device:
            self._add("host-sync", name, "dynamic-shape", seconds)
        elif name in ("aten::_to_copy", "aten::copy_") and tensors:
            src = tensors[-1] if name == "aten::copy_" else tensors[0]
            dst_cpu = (tensors[0].device.type == "cpu") if name == "aten::copy_" else (
                str(kwargs.get("device", src.device)).startswith("cpu"))
            if src.device.type != "cpu" and dst_cpu:
                self._add("host-sync", name, "copy-to-host", seconds)
        if not on_device:  # host work of a run with a device: not the card's
            return
        if self._would_fall_back(func):
            self._add("cpu-fallback", name, "cpu-fallback", seconds)
        if name in ("aten::lift_fresh", "aten::detach", "aten::alias"):
            pass
        elif any(t.dtype == torch.float64 for t in all_t):
            self._add("float64", name, "float64", seconds)
        elif (tensors and name not in _INT_OK and not func.is_view
              and all(t.dtype == torch.int64 for t in tensors) and any(t.numel() > 1 for t in tensors)
              and any(isinstance(o, torch.Tensor) and o.dtype == torch.int64 for o in outs)):
            self._add("int64", name, "int64", seconds)
        if func.is_view:  # views compile nothing
            return
        key = _shape_key(args)
        if not key:
            return
        self._shapes.setdefault(name, set()).add(key)
        site, code = self._site()
        seen = self._site_shapes.setdefault((site, name), set())
        first = self._first_step.setdefault((site, name), self.steps)
        if key not in seen:
            seen.add(key)
            if self.steps > first:  # the same line met another shape in an earlier step: one record per line
                h = self._hazards.get(("shapes", site))
                if h is None:
                    h = self._hazards[("shapes", site)] = Hazard("shapes", site, "", "shapes", code=code)
                h.count += 1
                h.shapes += 1
                ops = h.op.split(", ") if h.op else []
                if name not in ops:
                    h.op = ", ".join(ops + [name]) if len(ops) < 4 else h.op.rstrip(", ...") + ", ..."

    def _scalar_flavour(self) -> str:
        _, code = self._site()
        text = code.replace(" ", "")
        if text.startswith(("if", "elif", "while", "assert")) or "if" in code.split() or " and " in code or " or " in code:
            return "control-flow"
        return "item"

    def report(self) -> HazardReport:
        """The :class:`HazardReport` of everything seen so far."""
        return HazardReport(device=self.device, steps=self.steps, op_seconds=self.op_seconds, ops=self.ops,
                            hazards=list(self._hazards.values()),
                            distinct_shapes={k: len(v) for k, v in sorted(self._shapes.items()) if len(v) > 1})


@contextlib.contextmanager
def record_hazards(user_paths: Iterable[str] = (), device: str = "") -> Iterator[HazardRecorder]:
    """Record hazards inside the block; yields the :class:`HazardRecorder` (``.report()`` after it)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    rec = HazardRecorder(user_paths, device)

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            t0 = time.perf_counter()
            out = func(*args, **kwargs)
            rec.observe(func, args, kwargs, out, time.perf_counter() - t0)
            return out

    first: list = []

    def on_step(optimizer: Any, *_: Any) -> None:  # steps of the first optimizer that steps (a GAN has two)
        if not first:
            first.append(id(optimizer))
        if id(optimizer) == first[0]:
            rec.steps += 1

    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(on_step)
    try:
        with _Watch():
            yield rec
    finally:
        handle.remove()


def write_hazards(report: HazardReport, path: str, announce: Any = None) -> None:
    """Write ``report`` to ``path``: ``.json`` JSON, ``.html``/``.htm`` HTML, else text; ``-`` = text on stderr."""
    if path == "-":
        sys.stderr.write(report.to_text())
        return
    from torchport._json import write_text

    low = path.lower()
    text = report.to_json() if low.endswith(".json") else report.to_html() if low.endswith((".html", ".htm")) \
        else report.to_text()
    write_text(path, text)
    if announce is not None:
        announce(f"wrote {path}")
