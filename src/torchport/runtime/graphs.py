"""Graph capture and replay on the host: the CUDA-graph API for a device without one (the CPU, the emulated npu).

A CUDA graph records the kernels a block of code launches and ``replay()`` launches them again on the same
(static) memory. :class:`HostGraph` does the same one level up: while capturing, every aten operator that
runs is executed and recorded with its arguments (a ``TorchDispatchMode`` tape, below autograd, so a captured
``loss.backward()`` and ``optimizer.step()`` are recorded as the operators they run); ``replay()`` runs the
tape again in order: in-place and ``out=`` operators write into the captured tensors as they did, and each
fresh result is copied into the tensor the capture produced, so the static outputs (and every later operator
that read them) see the new values. Copy new data into the static inputs, ``replay()``, read the static
outputs: eager's results on those tensors.

Differences from a CUDA graph, by design: the capture itself executes (outputs are valid right after it, not
only after the first replay); there is no private memory pool (``pool`` is accepted, ``graph_pool_handle()``
is an opaque token); replay costs what eager costs (it re-runs the operators from Python); random operators
draw new numbers on each replay from the device generator (CUDA graphs advance their Philox offset too);
host synchronisations inside the captured block (``.item()``) are not refused.

Device-neutral (no device type named here): ``torchport.shim`` serves it for the CUDA graph calls where the
target's backend record names no graph API of its own, and the emulator serves it as its device module's
graph class.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["HostGraph", "graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing"]

_capturing = threading.local()
_pool_ids = itertools.count(1)


def is_current_stream_capturing() -> bool:
    """True while this thread captures a :class:`HostGraph`."""
    return getattr(_capturing, "depth", 0) > 0


def graph_pool_handle() -> tuple[str, int]:
    """An opaque memory-pool token (host graphs share the host allocator; the token is accepted by ``pool=``)."""
    return ("host-graph-pool", next(_pool_ids))


class _Tape(TorchDispatchMode):
    """Runs and records every aten operator: ``(op, args, kwargs, outputs)``."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


class HostGraph:
    """The CUDA graph class's interface over a recorded operator tape (see the module docstring)."""

    def __init__(self, keep_graph: bool = False) -> None:
        self._tape: _Tape | None = None
        self._ops: list[tuple[Any, tuple, dict, Any]] = []
        self._pool: Any = None

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        """Start recording (the operators still run)."""
        if self._tape is not None:
            raise RuntimeError("HostGraph.capture_begin: this graph is already capturing; call capture_end() first")
        self._pool = pool if pool is not None else graph_pool_handle()
        self._tape = _Tape()
        self._tape.__enter__()
        _capturing.depth = getattr(_capturing, "depth", 0) + 1

    def capture_end(self) -> None:
        """Stop recording; the tape is what :meth:`replay` runs."""
        if self._tape is None:
            raise RuntimeError("HostGraph.capture_end: capture_begin() was not called")
        _capturing.depth -= 1
        self._tape.__exit__(None, None, None)
        self._ops, self._tape = self._tape.ops, None

    def instantiate(self) -> None:
        """Nothing to instantiate: the tape is ready after :meth:`capture_end`."""

    def replay(self) -> None:
        """Run the captured operators again on the captured tensors."""
        if self._tape is not None:
            raise RuntimeError("HostGraph.replay: the graph is still capturing; call capture_end() first")
        with torch.no_grad():
            for func, args, kwargs, old in self._ops:
                new = func(*args, **kwargs)
                for o, n in zip(tree_leaves(old), tree_leaves(new)):
                    if (isinstance(o, torch.Tensor) and isinstance(n, torch.Tensor) and o is not n
                            and o.data_ptr() != n.data_ptr()):
                        o.copy_(n)

    def reset(self) -> None:
        """Forget the tape (the captured tensors stay as they are)."""
        self._ops = []

    def pool(self) -> Any:
        """The pool token given to (or made by) :meth:`capture_begin`."""
        return self._pool

    def enable_debug_mode(self) -> None:
        """Accepted; see :meth:`debug_dump`."""

    def debug_dump(self, debug_path: str) -> None:
        """Write the captured operators, one per line, to ``debug_path``."""
        with open(debug_path, "w", encoding="utf-8") as fh:
            fh.writelines(f"{func}\n" for func, _a, _k, _o in self._ops)

    def __len__(self) -> int:
        return len(self._ops)


@contextlib.contextmanager
def graph(cuda_graph: HostGraph, pool: Any = None, stream: Any = None, capture_error_mode: str = "global",
          **_kwargs: Any) -> Iterator[HostGraph]:
    """``with graph(g): ...`` captures the block into ``g`` (the CUDA ``graph`` context's signature; ``stream`` and
    ``capture_error_mode`` are accepted and have no effect on the host)."""
    cuda_graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
    try:
        yield cuda_graph
    finally:
        cuda_graph.capture_end()


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """CUDA's ``make_graphed_callables``: the callables themselves (a module or function, or a tuple of
    them), which compute on their real arguments exactly what the graphed versions replay -- forward and
    backward, eager's results. ``sample_args`` is checked for shape (one tuple per callable) only."""
    single = not isinstance(callables, tuple)
    items = (callables,) if single else callables
    samples = (sample_args,) if single else sample_args
    if len(items) != len(samples):
        raise ValueError(f"make_graphed_callables: {len(items)} callable(s) but {len(samples)} sample_args tuples")
    for c in items:
        if not callable(c):
            raise TypeError(f"make_graphed_callables: {c!r} is not callable")
    return items[0] if single else items
