"""``torch.compile`` on the emulated npu: Inductor compiles npu graphs with its CPU code generator.

The emulator's npu memory is host memory, so the code Inductor writes for the CPU (C++/OpenMP kernels and
a Python wrapper) can run on it as it stands. Rather than teach Inductor a new device (its scheduler,
lowerings and wrapper test ``device.type == "cpu"`` in ~100 places), the emulator hands Inductor a CPU
view of the graph -- the way torch_npu hands it an NPU one:

* compile time: the Dynamo graph's ``npu`` device constants become ``cpu``; its example inputs become CPU
  fake tensors with the same (symbolic) sizes, strides and ``requires_grad``; Inductor compiles the result
  as any CPU graph (``mode=``, ``options=``, ``dynamic=`` pass through);
* run time: each npu argument is handed over as the CPU tensor over its bytes (no copy), each result that
  was an npu tensor in the traced graph comes back as an npu tensor over the result's bytes (no copy), on
  the device index the graph gave it; gradients cross the same way (autograd functions whose backward
  is the reverse alias), so ``loss.backward()`` fills the npu parameters' ``.grad`` and in-place updates
  of buffers (BatchNorm's running statistics) land in the npu buffers.

Installed by :func:`install` (the emulator's ``install()``): it wraps torch's own default-backend object
(``torch._TorchCompileInductorWrapper.__call__``), a graph without npu inputs compiles unchanged, and
:func:`uninstall` puts torch's method back. Nothing is imported from Dynamo or Inductor until a graph is
compiled (importing them costs seconds). :func:`host_backend` gives the same treatment to any other
Dynamo backend (the ``torchair`` stand-in uses it).

Not the card's code: Inductor's CPU kernels, not torch_npu's Triton/MLIR/DVM ones; the emulator's HF32
rounding (``set_numerics("npu")``) applies to eager npu ops only; random ops inside a compiled graph draw
from Inductor's CPU generator, not the npu generator (compiled dropout masks differ from eager's, as
they do on CUDA).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from torchport.emulate import _tensor as T

__all__ = ["install", "uninstall", "host_backend", "is_npu_graph"]

_NAME = "npu"
_CPU = torch.device("cpu")
_saved: dict[str, Any] = {}


class _ToHost(torch.autograd.Function):
    """npu tensor -> the CPU tensor over its bytes; the gradient goes back the same way."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.index = x.device.index or 0
        return T.host(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return T.adopt(grad, ctx.index) if grad.device.type == "cpu" else grad


class _ToNpu(torch.autograd.Function):
    """A CPU result -> an npu tensor on ``npu:index`` over its bytes; the gradient goes back the same way."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, index: int) -> torch.Tensor:  # type: ignore[override]
        return T.adopt(x, index)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return (T.host(grad) if grad.device.type == _NAME else grad), None


def _is_npu(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == _NAME


def _to_host(value: Any) -> Any:
    if not _is_npu(value):
        return value
    return _ToHost.apply(value) if value.requires_grad and torch.is_grad_enabled() else T.host(value)


def _to_npu(value: Any, index: int | None) -> Any:
    if index is None or not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return value
    return _ToNpu.apply(value, index) if value.requires_grad and torch.is_grad_enabled() else T.adopt(value, index)


def _device_fix(value: Any) -> Any:
    if isinstance(value, torch.device) and value.type == _NAME:
        return _CPU
    if isinstance(value, str) and (value == _NAME or value.startswith(_NAME + ":")):
        return "cpu"
    return value


def _example_device(node: Any) -> torch.device | None:
    val = node.meta.get("example_value", node.meta.get("val"))
    return val.device if isinstance(val, torch.Tensor) else None


def is_npu_graph(gm: Any, example_inputs: Any) -> bool:
    """True when a Dynamo graph takes or makes npu tensors (the graphs :func:`host_backend` moves to the host)."""
    if any(_is_npu(x) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        dev = _example_device(node)
        if dev is not None and dev.type == _NAME:
            return True
    return False


def _output_indices(gm: Any) -> list[int | None]:
    """Per flat output of ``gm``: the npu device index it had in the traced graph, or None (not an npu tensor)."""
    import torch.utils._pytree as pytree

    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    leaves = pytree.tree_leaves(out.args[0])
    indices: list[int | None] = []
    for leaf in leaves:
        dev = _example_device(leaf) if isinstance(leaf, torch.fx.Node) else None
        indices.append((dev.index or 0) if dev is not None and dev.type == _NAME else None)
    return indices


def _host_graph(gm: Any) -> None:
    """Rewrite ``gm`` in place: every npu device constant in its calls becomes the CPU."""
    for node in gm.graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, _device_fix)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, _device_fix)
    gm.recompile()


def _host_examples(example_inputs: Any) -> list[Any]:
    """CPU fake tensors standing for the npu example inputs, with the sizes (symbolic ones too) Dynamo gave them."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(example_inputs)
    out: list[Any] = []
    for x in example_inputs:
        if not _is_npu(x):
            out.append(x)
            continue
        fake = fake_mode.from_tensor(x) if fake_mode is not None and not _is_fake(x) else x
        mode = fake_mode or fake.fake_mode
        with mode:
            cpu = torch.empty_strided(fake.size(), fake.stride(), dtype=fake.dtype, device=_CPU)
        if x.requires_grad:
            cpu.requires_grad_(True)
        out.append(cpu)
    return out


def _is_fake(x: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(x, FakeTensor)


def host_backend(compiler: Callable[..., Any]) -> Callable[..., Any]:
    """A Dynamo backend that compiles npu graphs with ``compiler`` on their CPU view (see the module docstring).

    Args:
        compiler: a Dynamo backend ``(gm, example_inputs, **kwargs) -> callable`` for CPU graphs.

    Returns:
        A backend with the same signature; graphs without npu tensors go to ``compiler`` unchanged.
    """

    @functools.wraps(compiler)
    def backend(gm: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_npu_graph(gm, example_inputs):
            return compiler(gm, example_inputs, *args, **kwargs)
        indices = _output_indices(gm)
        _host_graph(gm)
        compiled = compiler(gm, _host_examples(example_inputs), *args, **kwargs)

        def run(*inputs: Any) -> Any:
            host = [_to_host(x) for x in inputs]
            outs = compiled(*host)  # Dynamo calls a backend's result unboxed
            if isinstance(outs, (list, tuple)) and len(outs) == len(indices):
                return type(outs)(_to_npu(o, i) for o, i in zip(outs, indices))
            return outs

        run._torchport_npu_graph = True  # type: ignore[attr-defined]
        return run

    return backend


def install() -> None:
    """Route ``torch.compile``'s default backend (Inductor) through :func:`host_backend` for npu graphs."""
    wrapper = torch._TorchCompileInductorWrapper
    if "call" in _saved:
        return
    original = wrapper.__call__
    _saved["call"] = original

    def __call__(self: Any, model_: Any, inputs_: Any, **kwargs: Any) -> Any:
        return host_backend(functools.partial(original, self))(model_, inputs_, **kwargs)

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__call__ = __call__  # type: ignore[method-assign]


def uninstall() -> None:
    """Put torch's default-backend method back."""
    original = _saved.pop("call", None)
    if original is not None:
        torch._TorchCompileInductorWrapper.__call__ = original  # type: ignore[method-assign]
