"""Run unmodified CUDA-only code on whatever backend torchport selects, reversibly.

The run-time half of migration (the static half is ``torchport scan`` / ``fix``).
``install()`` selects a device (npu > cuda > xpu > mps > cpu, or ``TORCHPORT_DEVICE``)
and redirects CUDA device arguments and ``torch.cuda.*`` calls to it; ``uninstall()``
puts every patched attribute back as the identical object; the report says what was
redirected, how often, and where in your code it was first asked for.

Unlike torch_npu's ``transfer_to_npu`` it targets any backend, is reversible,
reports, leaves ``torch.jit.script`` alone, and answers ``torch.cuda.is_available()``
per caller: True for your code (so ``"cuda" if torch.cuda.is_available() else "cpu"``
lands on the accelerator), the real answer for installed libraries and torch (so
they do not take CUDA-only kernel paths). See ``docs/shim.md``.

Entry points::

    torchport run train.py --epochs 1           # command line (report printed at exit)
    import torchport.auto                       # one line at the top of a script
    with torchport.shim.redirect_cuda(): ...    # a block
    shim = torchport.shim.install(); ...; torchport.shim.uninstall()
    torchport.compat.init()                     # a fixed file: what the shim does for that name

Every public CUDA name and its treatment: :mod:`torchport.shim.surface` (the one registry).
"""

from __future__ import annotations

from torchport.shim.core import Shim, ShimError, active, install, redirect_cuda, uninstall
from torchport.shim.report import RedirectRecord, RedirectReport
from torchport.shim.surface import RefusedCall, standin

__all__ = [
    "install",
    "uninstall",
    "redirect_cuda",
    "active",
    "report",
    "Shim",
    "ShimError",
    "RedirectReport",
    "RedirectRecord",
    "RefusedCall",
    "standin",
]


def report() -> RedirectReport | None:
    """The active shim's :class:`RedirectReport` (None when no shim is installed)."""
    shim = active()
    return shim.report if shim is not None else None
