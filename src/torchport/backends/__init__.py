"""Backend records and their registry: THE ONLY PLACE THAT NAMES A DEVICE TYPE.

Read :mod:`torchport.backends.spec` first; it is the one contract. Built-in
backends are registered here, one line each; third parties use the
``torchport.backends`` entry-point group.
"""

from torchport.backends import cpu, cuda, mps, npu, xpu
from torchport.backends.registry import (
    DuplicateBackendError,
    UnknownBackendError,
    get,
    names,
    register,
    specs,
    unregister,
)
from torchport.backends.spec import AmpPolicy, BackendSpec, BackendUnavailable

register(npu.SPEC)
register(cuda.SPEC)
register(xpu.SPEC)
register(mps.SPEC)
register(cpu.SPEC)

__all__ = [
    "AmpPolicy",
    "BackendSpec",
    "BackendUnavailable",
    "DuplicateBackendError",
    "UnknownBackendError",
    "get",
    "names",
    "register",
    "specs",
    "unregister",
]
