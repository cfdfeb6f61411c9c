"""Dispatch-level probes the device audit runs a few training steps under.

* :class:`ModuleTracker` -- which module is running (global forward hooks), and an
  annotation of every autograd node with the module that created it, so that
  backward ops are attributed too (``torch._C._current_autograd_node``).
* :class:`DeviceProbe` -- a ``TorchDispatchMode`` that sees every aten op, forward and
  backward, and records each one that touches a CPU tensor while an accelerator is
  selected, or mixes devices, with module, phase and op.
* :func:`capture_fallbacks` -- collects backend CPU-fallback warnings
  ("The operator 'X' is not currently supported on the <backend> backend and will fall
  back to run on the CPU") per op.

CPU scalars (0-dim tensors) are ignored: PyTorch allows them next to device tensors
by design (optimizer step counters, ``loss * 0.5`` constants).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
import threading
import warnings
from typing import Any, Iterator

__all__ = ["ModuleTracker", "DeviceProbe", "OpFinding", "capture_fallbacks", "FALLBACK_RE"]

#: the Ascend plugin's (and the emulator's) CPU-fallback warning; the backend name is captured, not assumed.
FALLBACK_RE = re.compile(
    r"operator '(?P<op>[^']+)' is not currently supported on the (?P<backend>[\w ]+?) backend "
    r"and will fall back to run on the CPU", re.IGNORECASE)

_COPY_OPS = {"aten._to_copy.default", "aten.copy_.default", "aten._copy_from.default",
             "aten._copy_from_and_resize.default", "aten.to.dtype_layout", "aten.to.device", "aten.lift_fresh.default"}
_META_KEY = "torchport_module"


class ModuleTracker:
    """Know which module is running, in forward and in backward.

    Args:
        roots: ``{"model": model, "loss": loss_fn}``; names become ``model.layer1.0.conv1``.

    Use as a context manager; :attr:`current` is the innermost running module's name
    (None outside modules). Inside backward, :meth:`backward_module` names the module
    whose forward created the autograd node being run.
    """

    def __init__(self, roots: dict[str, Any]) -> None:
        import torch

        self.names: dict[int, str] = {}
        for prefix, root in roots.items():
            if isinstance(root, torch.nn.Module):
                for name, mod in root.named_modules():
                    self.names.setdefault(id(mod), f"{prefix}.{name}" if name else prefix)
        self._stack: list[str] = []
        self._local = threading.get_ident()
        self._handles: list[Any] = []
        self._fmode: Any = None

    @property
    def current(self) -> str | None:
        """Innermost running module, or None."""
        return self._stack[-1] if self._stack else None

    def __enter__(self) -> "ModuleTracker":
        import torch
        from torch.overrides import TorchFunctionMode

        mm = torch.nn.modules.module

        def pre(mod, args):
            name = self.names.get(id(mod))
            if name is not None and threading.get_ident() == self._local:
                self._stack.append(name)

        def post(mod, args, out):
            name = self.names.get(id(mod))
            if name is not None and threading.get_ident() == self._local and self._stack:
                self._stack.pop()

        self._handles = [mm.register_module_forward_pre_hook(pre), mm.register_module_forward_hook(post)]
        tracker = self

        class _Annotate(TorchFunctionMode):
            """Tag each new autograd node with the running module (for backward attribution)."""

            def __torch_function__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                name = tracker.current
                if name is not None:
                    for t in out if isinstance(out, (tuple, list)) else (out,):
                        fn = getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else None
                        if fn is not None:
                            try:
                                fn.metadata.setdefault(_META_KEY, name)
                            except Exception:  # some nodes have no metadata dict
                                pass
                return out

        self._fmode = _Annotate()
        self._fmode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fmode is not None:
            self._fmode.__exit__(*exc)
            self._fmode = None
        for h in self._handles:
            h.remove()
        self._handles = []
        self._stack.clear()

    @staticmethod
    def backward_node() -> Any:
        """The autograd node being executed (None outside backward)."""
        import torch

        fn = getattr(torch._C, "_current_autograd_node", None)
        try:
            return fn() if fn is not None else None
        except Exception:
            return None

    @staticmethod
    def backward_module(node: Any) -> str | None:
        """Module that created ``node`` in forward (None when unknown)."""
        try:
            return node.metadata.get(_META_KEY)
        except Exception:
            return None


@dataclasses.dataclass
class OpFinding:
    """Every occurrence of one (kind, op, module, phase), aggregated.

    Attributes:
        kind: ``"cpu-input"`` (an op on the accelerator got a CPU tensor), ``"mixed-devices"``
            (tensors of several accelerator devices), ``"cpu-op"`` (the op ran wholly on CPU
            inside the model), ``"h2d-copy"`` (a host-to-device copy inside a module's forward).
        op: aten overload (``aten.sub.Tensor``).
        module: module path (``model.0.1``), ``"loss.*"``, or None.
        phase: ``forward`` / ``backward`` / ``optimizer`` / the harness phase.
        devices: devices of the tensor arguments at first sight.
        shapes: shapes of the CPU tensors at first sight.
        count: occurrences.
        node: autograd node name for backward ops.
    """

    kind: str
    op: str
    module: str | None
    phase: str
    devices: list[str]
    shapes: list[list[int]]
    count: int = 1
    node: str | None = None

    @property
    def where(self) -> str:
        """``module (op, phase)`` for evidence."""
        place = self.module or "(outside any module)"
        extra = f", node {self.node}" if self.node else ""
        return f"{place} [{self.op}, {self.phase}{extra}]"


class DeviceProbe:
    """Record ops that touch CPU tensors or mix devices while running on ``expected``.

    Args:
        expected: the ``torch.device`` the job should run on.
        tracker: a :class:`ModuleTracker` for attribution (optional).

    Use as a context manager around training steps; set :attr:`phase` as the step
    proceeds. :attr:`findings` lists the aggregated :class:`OpFinding` records and
    :attr:`ops_seen` the total number of ops dispatched.
    """

    def __init__(self, expected: Any, tracker: ModuleTracker | None = None) -> None:
        self.expected = expected
        self.tracker = tracker
        self.phase = "forward"
        self.ops_seen = 0
        #: ``{"aten::convolution": {"model.0.0 (forward)": 2, ...}}`` -- where every op ran (for fallback reports)
        self.op_sites: dict[str, dict[str, int]] = {}
        self._agg: "collections.OrderedDict[tuple, OpFinding]" = collections.OrderedDict()
        self._mode: Any = None

    @property
    def findings(self) -> list[OpFinding]:
        """Aggregated findings in first-seen order."""
        return list(self._agg.values())

    def _record(self, kind: str, op: str, module: str | None, phase: str, devices: list[str],
                shapes: list[list[int]], node: str | None) -> None:
        key = (kind, op, module, phase)
        found = self._agg.get(key)
        if found is None:
            self._agg[key] = OpFinding(kind, op, module, phase, devices, shapes, node=node)
        else:
            found.count += 1

    def inspect(self, func: Any, args: tuple, kwargs: dict, out: Any = None) -> None:
        """Judge one op (called before the op runs, so a failing op is still recorded)."""
        import torch
        from torch.utils._pytree import tree_flatten

        self.ops_seen += 1
        accel = self.expected.type != "cpu"
        flat, _ = tree_flatten((args, kwargs))
        tensors = [t for t in flat if isinstance(t, torch.Tensor)]
        node = ModuleTracker.backward_node()
        if node is not None:
            phase, module, node_name = "backward", ModuleTracker.backward_module(node), node.name()
        else:
            phase = self.phase
            module = self.tracker.current if self.tracker is not None else None
            node_name = None
        op = str(func)
        parts = op.split(".")
        site = f"{module or '(no module)'} ({phase})"
        sites = self.op_sites.setdefault(f"{parts[0]}::{parts[1]}" if len(parts) > 1 else op, {})
        sites[site] = sites.get(site, 0) + 1
        if not tensors:
            return
        cpu = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
        devs = sorted({str(t.device) for t in tensors if t.device.type != "cpu"})
        shapes = [list(t.shape) for t in cpu][:4]
        if len(devs) > 1:
            self._record("mixed-devices", op, module, phase, devs + (["cpu"] if cpu else []), shapes, node_name)
        elif accel and cpu:
            if op in _COPY_OPS:
                if module is not None and devs == [] and phase == "forward":
                    self._record("h2d-copy", op, module, phase, ["cpu"], shapes, node_name)
                return
            if devs:
                self._record("cpu-input", op, module, phase, devs + ["cpu"], shapes, node_name)
            elif module is not None or phase == "backward":
                self._record("cpu-op", op, module, phase, ["cpu"], shapes, node_name)

    def __enter__(self) -> "DeviceProbe":
        from torch.utils._python_dispatch import TorchDispatchMode

        probe = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                try:
                    probe.inspect(func, args, kwargs)
                except Exception:  # the probe must never break the run it observes
                    pass
                return func(*args, **kwargs)

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None


@contextlib.contextmanager
def capture_fallbacks() -> Iterator[dict[str, dict[str, Any]]]:
    """Collect CPU-fallback warnings per op while the block runs.

    Yields a dict ``{op: {"count": n, "backend": name, "message": first message}}``, filled
    when the block exits. ``torch.set_warn_always(True)`` is on inside the block so that
    once-per-process C++ warnings are seen again; other warnings are re-emitted.
    """
    import torch

    found: dict[str, dict[str, Any]] = {}
    old_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield found
        finally:
            torch.set_warn_always(old_always)
            others = []
            for w in caught:
                m = FALLBACK_RE.search(str(w.message))
                if m is None:
                    others.append(w)
                    continue
                entry = found.setdefault(m.group("op"), {"count": 0, "backend": m.group("backend"),
                                                         "message": str(w.message)[:300]})
                entry["count"] += 1
    for w in others:
        if not issubclass(w.category, DeprecationWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
