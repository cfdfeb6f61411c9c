"""torch_npu's custom ops on the emulated NPU, one module per family, all in one table (``_registry.OPS``).

:func:`install` puts every custom-op name of the real torch_npu 2.14.0 wheel on the stand-in module:
the emulated ones (composed from torch ops; gradients flow where the card has a backward) and, for the
rest, a function that raises ``NotImplementedError: torch_npu.<name> is not emulated ...`` — so
``hasattr(torch_npu, name)`` answers as on the card. Like torch_npu 2.14.0 (``_init/core/_exports.py``)
it also sets ``torch.<name>`` to a function raising torch_npu's deprecation error; with
``TORCHPORT_NPU_TORCH_OPS=alias`` ``torch.<name>`` is the op itself, as in the older torch_npu releases
that Ascend's ModelZoo scripts were written for.

``tools/npu_op_scan.py --coverage`` writes the coverage table of docs/emulator.md from a scan.
"""

from __future__ import annotations

import os

import torch

from torchport.emulate import _formats

from . import _registry
from ._registry import OPS, NotEmulated, op, refusal, wheel_ops

# the families (importing them fills OPS)
from . import activations, boxes, dropout, float_status, layout, linalg, losses, optim, softmax  # noqa: E402,F401

op("npu_format_cast", backward=True)(_formats.npu_format_cast)
op("npu_format_cast_", backward=True)(_formats.npu_format_cast_)
op("get_npu_format", backward=False)(_formats.get_npu_format)

__all__ = ["OPS", "NotEmulated", "install", "uninstall", "torch_ops_mode", "coverage_rows", "coverage_markdown"]

#: names set on ``torch`` by :func:`install` (removed by :func:`uninstall`)
_ON_TORCH: list = []
_ENV = "TORCHPORT_NPU_TORCH_OPS"


def torch_ops_mode() -> str:
    """``deprecated`` (torch_npu 2.14.0: ``torch.npu_*`` raise) or ``alias`` (``torch.npu_*`` are the ops)."""
    mode = os.environ.get(_ENV, "deprecated").strip().lower() or "deprecated"
    if mode not in ("deprecated", "alias"):
        raise RuntimeError(f"{_ENV}={mode!r}: use 'deprecated' (torch_npu 2.14.0 behaviour) or 'alias'")
    return mode


def _deprecated(name: str):
    def deprecated(*args, **kwargs):
        raise RuntimeError(f"torch.{name} is deprecated and will be removed in future version. "
                           f"Use torch_npu.{name} instead.")
    deprecated.__name__ = name
    deprecated.__torchport_emulated__ = True
    return deprecated


def install(module) -> None:
    """Set every custom op of the wheel on ``module`` (the ``torch_npu`` stand-in), and ``torch.<name>``."""
    alias = torch_ops_mode() == "alias"
    for name in sorted(wheel_ops() | set(OPS)):
        fn = OPS[name].fn if name in OPS else refusal(name)
        if not hasattr(module, name) or name in OPS:
            setattr(module, name, fn)
        if not hasattr(torch, name) or getattr(getattr(torch, name), "__torchport_emulated__", False):
            setattr(torch, name, fn if alias else _deprecated(name))
            _ON_TORCH.append(name)


def uninstall() -> None:
    """Remove the ``torch.<name>`` attributes :func:`install` set."""
    while _ON_TORCH:
        name = _ON_TORCH.pop()
        if getattr(getattr(torch, name, None), "__torchport_emulated__", False):
            delattr(torch, name)


def coverage_rows(scan: dict) -> list:
    """One row per name the scanned code uses: (name, uses, receivers, status, family, backward, note)."""
    import torch_npu.contrib as contrib

    rows = []
    for name, entry in scan["names"].items():
        receivers = ", ".join(sorted(entry["receivers"]))
        via_contrib = all(r.startswith("torch_npu.contrib") for r in entry["receivers"])
        if via_contrib and hasattr(contrib.function, name):   # torch_npu.contrib[.function].<name>: the Python helper
            refused = getattr(getattr(contrib.function, name), "__torchport_refused__", False)
            rows.append((name, entry["count"], receivers, "refused in one line" if refused else "emulated",
                         "contrib.function", "" if refused else "autograd through its ops",
                         "torch_npu/contrib/function: needs the card's fused BERT kernels" if refused else
                         "torch_npu/contrib/function's logic over the emulated ops"))
        elif name in OPS:
            o = OPS[name]
            rows.append((name, entry["count"], receivers, "emulated", o.family,
                         "yes" if o.backward else "no (card has none)", o.note))
        elif callable(getattr(getattr(torch.npu, "utils", None), name, None)):
            rows.append((name, entry["count"], receivers, "emulated", "torch.npu.utils", "no (Python function)",
                         "torch_npu/npu/utils.py's logic"))
        elif name in wheel_ops():
            rows.append((name, entry["count"], receivers, "refused in one line", "", "", "in the wheel, not emulated"))
        else:
            rows.append((name, entry["count"], receivers, "absent", "", "",
                         "not in the torch_npu 2.14.0 wheel (AttributeError there too)"))
    return rows


def coverage_markdown(scan: dict) -> str:
    """The coverage table (markdown) for a ``tools/npu_op_scan.py --json`` scan."""
    rows = coverage_rows(scan)
    emulated = sum(1 for r in rows if r[3] == "emulated")
    lines = [f"Scan: `{scan.get('source', '?').rsplit('/', 2)[-2] if '/' in scan.get('source', '') else scan.get('source')}`"
             f" at `{scan.get('commit', '?')[:12]}`, under `{scan.get('under', '')}`: {len(rows)} distinct names, "
             f"{emulated} emulated; {len(OPS)} ops emulated in all, {len(wheel_ops() - set(OPS))} other names of "
             "the wheel refuse in one line.", "",
             "| name | uses | called as | status | family | backward | note |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| `" + r[0] + "` | " + " | ".join(str(c) for c in r[1:]) + " |")
    return "\n".join(lines) + "\n"
