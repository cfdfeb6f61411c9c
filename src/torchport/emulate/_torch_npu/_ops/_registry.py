"""The one table of torch_npu's custom ops on the emulated NPU.

Each family module (``layout``, ``linalg``, ``softmax``, ``dropout``, ``losses``, ``boxes``,
``optim``, ``float_status``, ``activations``) decorates its functions with :func:`op`; the table
installs them on the ``torch_npu`` stand-in and generates the coverage page. Every other custom
op of the real wheel (``data/torch_npu_2_14_0_custom_ops.txt``) exists too and refuses in one line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

__all__ = ["Op", "op", "OPS", "wheel_ops", "python_names", "has_card_backward", "refusal", "NotEmulated"]

_DATA = Path(__file__).resolve().parents[2] / "data" / "torch_npu_2_14_0_custom_ops.txt"


@dataclass(frozen=True)
class Op:
    """One emulated op: its torch_npu name, the function, its family and how autograd treats it."""

    name: str
    fn: Callable
    family: str
    backward: bool      # the card registers a backward for it: gradients flow through the composition
    note: str = ""      # where the emulation differs or assumes (shown in the coverage table)


#: name -> Op, filled by the family modules at import
OPS: dict = {}


class NotEmulated(NotImplementedError):
    """A torch_npu op that exists on the card but not on the emulated NPU."""


def _detached(fn: Callable) -> Callable:
    """The card has no backward for this op: its outputs do not take part in autograd."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return run


def op(name: str | None = None, *, backward: bool | None = None, note: str = "") -> Callable:
    """Register the decorated function as ``torch_npu.<name>`` (default: the function's name).

    ``backward`` defaults to what the wheel says (:func:`has_card_backward`); without one the op runs
    under ``no_grad`` (on the card its outputs would not have a gradient either).
    """
    def deco(fn: Callable) -> Callable:
        n = name or fn.__name__
        bw = has_card_backward(n) if backward is None else backward
        family = fn.__module__.rsplit(".", 1)[-1]
        wrapped = fn if bw else _detached(fn)
        wrapped.__torchport_emulated__ = True
        if n in OPS:
            raise RuntimeError(f"torch_npu op {n!r} registered twice ({OPS[n].family} and {family})")
        OPS[n] = Op(n, wrapped, family, bw, note)
        return fn
    return deco


@functools.lru_cache(maxsize=1)
def wheel_ops() -> frozenset:
    """The custom-op names of the torch_npu 2.14.0 wheel (``torch.ops.npu.<name>``, exported as ``torch_npu.<name>``)."""
    return frozenset(ln.strip() for ln in _DATA.read_text().splitlines() if ln.strip() and not ln.startswith("#"))


#: ops whose backward kernel has another name in the wheel
_BACKWARD_BY = {"npu_bmmV2": "npu_bmm_v2_mat1_backward", "npu_roi_align": "npu_roi_alignbk",
                "npu_deformable_conv2d": "npu_deformable_conv2dbk", "npu_dropout_do_mask": "npu_dropout_backward",
                "_npu_dropout": "npu_dropout_backward", "npu_geglu": "npu_geglu_grad",
                "npu_linear": "npu_linear_backward", "npu_max": "npu_max_backward", "npu_min": "npu_min_backward",
                "npu_layer_norm_eval": "", "npu_transpose": "", "npu_confusion_transpose":
                "npu_confusion_transpose_backward", "npu_fusion_attention": "npu_fusion_attention_grad",
                "npu_gelu": "npu_gelu_backward", "npu_dtype_cast": "npu_dtype_cast_backward"}
#: view-like ops: autograd flows through them on the card (torch_npu registers them in derivatives.yaml)
_VIEWLIKE = frozenset({"npu_transpose", "npu_broadcast", "npu_slice", "npu_indexing", "npu_pad",
                       "npu_format_cast", "npu_rotary_mul", "npu_sort_v2"})


def has_card_backward(name: str) -> bool:
    """Whether the wheel has a backward kernel for ``name`` (``<name>_backward`` / ``_grad`` or the map above)."""
    ops = wheel_ops()
    if name in _VIEWLIKE:
        return True
    other = _BACKWARD_BY.get(name)
    if other:
        return other in ops
    return f"{name}_backward" in ops or f"{name}_grad" in ops


def refusal(name: str, where: str = "torch_npu", why: str = "torchport's emulated NPU has no composition for it; "
            "see docs/emulator.md, 'torch_npu custom ops'") -> Callable:
    """A callable for a name of the wheel that is not emulated: it raises one line naming ``where.name``."""
    def not_emulated(*args, **kwargs):
        raise NotEmulated(f"{where}.{name} is not emulated ({why})")
    not_emulated.__name__ = name
    not_emulated.__qualname__ = name
    not_emulated.__torchport_emulated__ = True
    not_emulated.__torchport_refused__ = True
    return not_emulated


_PYTHON_NAMES = _DATA.with_name("torch_npu_2_14_0_python_names.txt")


@functools.lru_cache(maxsize=1)
def python_names() -> tuple:
    """``"module name"`` entries of torch_npu 2.14.0's Python surfaces beside its ops (contrib, contrib.function,
    contrib.module, utils, testing.decorator), from ``data/torch_npu_2_14_0_python_names.txt``."""
    return tuple(ln.strip() for ln in _PYTHON_NAMES.read_text().splitlines() if ln.strip() and not ln.startswith("#"))
