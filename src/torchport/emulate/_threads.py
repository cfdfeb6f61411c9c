"""Host threading that stays the host's: torch's pin-memory thread must not set the npu's thread count.

``DataLoader(pin_memory=True, num_workers>0)`` starts a pin thread whose first line is
``torch.set_num_threads(1)`` -- meant for itself ("This setting is thread local", says torch's
comment), but ATen also stores it as the process-wide count that every thread reads when it runs
its first parallel kernel. On a card that touches host work only. On the emulated npu the device
*is* host kernels: the autograd engine's npu threads (created at the first backward), and the main
thread if it had not run a parallel op yet, then compute single-threaded -- half the speed on 2 cores,
and summed in another order than the same script on CPU (which pins nothing, so has no pin thread).

While the emulator is installed, the pin thread's call sets only its own OpenMP count (libgomp's
``omp_set_num_threads`` is per thread); every other ``torch.set_num_threads`` call is torch's own.
"""

from __future__ import annotations

import ctypes
import functools
import re
import threading
from typing import Any, Callable

__all__ = ["install", "uninstall"]

_local = threading.local()
_saved: dict[str, Any] = {}


def _thread_local_setter() -> Callable[[int], None] | None:
    """``omp_set_num_threads`` of the OpenMP runtime torch loaded (per-thread ICV), or None if none is found."""
    try:
        with open("/proc/self/maps") as maps:
            paths = set(re.findall(r"(/\S*lib[gi]omp[^/\s]*\.so[.\d]*)", maps.read()))
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path).omp_set_num_threads
        except (OSError, AttributeError):
            continue
    return None


def install() -> None:
    """Wrap torch's pin-memory loop and ``torch.set_num_threads`` (idempotent; :func:`uninstall` undoes it)."""
    import torch
    from torch.utils.data._utils import pin_memory

    if _saved:
        return
    setter = _thread_local_setter()
    loop, set_threads = pin_memory._pin_memory_loop, torch.set_num_threads

    @functools.wraps(loop)
    def _pin_memory_loop(*args: Any, **kwargs: Any) -> Any:
        _local.pin_thread = True
        return loop(*args, **kwargs)

    @functools.wraps(set_threads)
    def set_num_threads(n: int) -> None:
        if getattr(_local, "pin_thread", False) and setter is not None:
            setter(int(n))        # this thread only: the npu's (host) kernels keep the process's count
            return
        set_threads(n)

    _saved.update(loop=loop, set_threads=set_threads)
    pin_memory._pin_memory_loop = _pin_memory_loop
    torch.set_num_threads = set_num_threads


def uninstall() -> None:
    """Put torch's own functions back."""
    if not _saved:
        return
    import torch
    from torch.utils.data._utils import pin_memory

    pin_memory._pin_memory_loop = _saved.pop("loop")
    torch.set_num_threads = _saved.pop("set_threads")
