"""The shim object: select a device, patch CUDA entry points onto it, undo exactly.

Most users never touch this module directly; they use ``torchport run script.py``,
``import torchport.auto`` or ``with torchport.shim.redirect_cuda(): ...``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from typing import Any, Iterable, Iterator

from torchport.shim._callers import CallerClassifier
from torchport.shim._patch import Patch, PatchTable
from torchport.shim.report import RedirectReport

__all__ = ["Shim", "ShimError", "install", "uninstall", "redirect_cuda", "active"]


class ShimError(RuntimeError):
    """The shim cannot be installed (another CUDA shim is active, or a conflicting install)."""


def _fmt_before(value: Any) -> str:
    import torch

    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, str) and ("(" in value or " " in value or "=" in value):
        return value  # already a description, e.g. "cuda()" or "pin_memory=True"
    return repr(value)


def _fmt_after(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt_after(v) for v in value) + "]"
    return str(value)


class Shim:
    """One installation of the CUDA -> selected-device redirection.

    Attributes:
        target: the selected :class:`~torchport.runtime.device.Target`.
        map: the :class:`~torchport.shim._mapping.DeviceMap` doing the rewrites.
        report: the :class:`~torchport.shim.report.RedirectReport` being filled.
        classifier: tells user code from library code (``torch.cuda.is_available``).
        cpu_fallback: True when no accelerator was found and CUDA means CPU.
    """

    def __init__(self, target: Any, *, user_paths: Iterable[str] = (), cpu_fallback: bool = False) -> None:
        from torchport.shim._mapping import DeviceMap

        self.target = target
        self.cpu_fallback = cpu_fallback
        self.map = DeviceMap(target, _dist_backend(target))
        self.report = RedirectReport(target=str(target.device), backend=target.backend.label, cpu_fallback=cpu_fallback)
        self.classifier = CallerClassifier(user_paths)
        self._table = PatchTable()
        self._jit_ids: list[int] = []
        self.installed = False

    # -- bookkeeping used by every wrapper ---------------------------------------------
    def hit(self, api: str, before: Any, after: Any) -> None:
        """Count one redirected call of ``api``; the first one also records its call site."""
        rec = self.report.hit(api)
        if rec is not None:
            rec.first_call_site = self.classifier.first_user_site(sys._getframe(1))
            rec.example = f"{_fmt_before(before)} -> {_fmt_after(after)}"

    @property
    def patches(self) -> list[Patch]:
        """The active patch table (empty once uninstalled)."""
        return list(self._table)

    # -- install / uninstall ------------------------------------------------------------
    def _entries(self) -> list[tuple[Any, str, Any, str]]:

        from torchport.shim import _redirects as r
        from torchport.shim._cuda_api import cuda_patches

        entries = cuda_patches(self)   # every name of shim/surface.py with an implementation
        for build in (r.factory_patches, r.tensor_patches, r.module_patches, r.amp_patches, r.load_patches,
                      r.distributed_patches, r.data_patches):
            entries.extend(build(self))
        return entries

    def _install(self) -> None:
        if self.installed:
            return
        if self.target.type == "cuda":
            self.report.note("the selected device is CUDA itself: nothing to redirect")
            self.installed = True
            return
        import torch

        builtins = _jit_builtins()
        entries = self._entries()
        try:
            for owner, name, replacement, api in entries:
                patch = self._table.apply(owner, name, replacement, api=api)
                # TorchScript resolves torch.<fn> through a table keyed by id(fn): teach it that our
                # wrapper is the same aten op, so torch.jit.script keeps compiling user code.
                if builtins is not None and owner is torch:
                    op = builtins.get(id(patch.original))
                    if op is not None:
                        builtins[id(replacement)] = op
                        self._jit_ids.append(id(replacement))
        except BaseException:
            self._uninstall()
            raise
        self.installed = True

    def _uninstall(self) -> list[str]:
        builtins = _jit_builtins()
        if builtins is not None:
            for key in self._jit_ids:
                builtins.pop(key, None)
        self._jit_ids.clear()
        failed = self._table.restore()
        self.installed = False
        return failed

    def __repr__(self) -> str:
        state = "installed" if self.installed else "not installed"
        return f"Shim(target={self.target}, {state}, {len(self._table)} patches)"


def _dist_backend(target: Any) -> str:
    try:
        from torchport.runtime.distributed import dist_backend

        return dist_backend(target)
    except Exception:  # torch.distributed missing in this build
        return target.backend.dist_backend


def _jit_builtins() -> dict[int, str] | None:
    """TorchScript's builtin-function table, built now (from the unpatched torch) if it was not yet."""
    try:
        from torch.jit import _builtins

        return _builtins._get_builtin_table()
    except Exception:  # pragma: no cover - TorchScript absent from this torch build
        return None


#: The one warning a CPU fallback gets (category :class:`~torchport.CPUFallbackWarning`).
CPU_FALLBACK_MESSAGE = (
    "torchport shim: no accelerator found, so CUDA calls run on the CPU (typically 10-50x slower). "
    "Run `torchport doctor` to see why; pass --require-accelerator (or set "
    "TORCHPORT_REQUIRE_ACCELERATOR=1) to make this an error."
)

_lock = threading.RLock()
_active: Shim | None = None


def active() -> Shim | None:
    """The installed :class:`Shim`, or None."""
    return _active


def install(
    device: Any = None,
    *,
    require_accelerator: bool | None = None,
    user_paths: Iterable[str] = (),
    warn: bool = True,
) -> Shim:
    """Redirect CUDA calls to the device torchport selects; return the :class:`Shim`.

    Args:
        device: ``"auto"``/None (``TORCHPORT_DEVICE`` or auto), a backend name, ``"npu:1"``,
            or a :class:`~torchport.runtime.device.Target`.
        require_accelerator: fail instead of running on CPU; default
            ``TORCHPORT_REQUIRE_ACCELERATOR``.
        user_paths: files/directories that count as user code for the caller-aware
            ``torch.cuda.is_available()`` even inside site-packages.
        warn: emit the single :class:`~torchport.CPUFallbackWarning` when auto selection found
            no accelerator (an explicit ``device="cpu"`` is not a fallback and does not warn).

    Returns:
        The installed shim (the already active one when called again with no or the same device).

    Raises:
        NoAcceleratorError: require-accelerator mode and only the CPU is present.
        ShimError: torch_npu's ``transfer_to_npu`` (or another CUDA shim) is already active,
            or a shim for a different device is installed.

    Example::

        shim = torchport.shim.install()
        model = MyNet().cuda()      # lands on npu:0 / xpu:0 / mps / cpu
        torchport.shim.uninstall()
    """
    global _active
    from torchport.runtime.device import CPUFallbackWarning, Target, select_device

    with _lock:
        if _active is not None:
            wanted = device.device if isinstance(device, Target) else device
            if wanted in (None, "auto") or str(wanted) in (str(_active.target.device), _active.target.type):
                for path in user_paths:
                    _active.classifier.add_user_path(path)
                return _active
            raise ShimError(f"a torchport shim for {_active.target} is already installed; "
                            f"call torchport.shim.uninstall() before installing one for {device!r}")
        _refuse_foreign_shim()
        if isinstance(device, Target):
            target = device
        else:
            target = select_device(device, require_accelerator=require_accelerator, warn=False)
        # Only an *automatic* landing on CPU is a fallback worth a warning; asking for cpu is not.
        cpu_fallback = not target.is_accelerator and target.reason == "auto"
        shim = Shim(target, user_paths=user_paths, cpu_fallback=cpu_fallback)
        shim._install()
        _active = shim
    if cpu_fallback and warn:
        warnings.warn(CPU_FALLBACK_MESSAGE, CPUFallbackWarning, stacklevel=2)
    return shim


def uninstall() -> RedirectReport | None:
    """Restore every patched attribute to the identical original object; return the report.

    Returns None when no shim was installed.

    Raises:
        ShimError: some attribute could not be restored (named in the message).
    """
    global _active
    with _lock:
        shim, _active = _active, None
        if shim is None:
            return None
        failed = shim._uninstall()
    if failed:
        raise ShimError("torchport shim could not restore: " + "; ".join(failed))
    return shim.report


@contextlib.contextmanager
def redirect_cuda(device: Any = None, **kwargs: Any) -> Iterator[Shim]:
    """Context manager form of :func:`install` / :func:`uninstall`.

    Nested inside an active shim it reuses it and leaves it installed.

    Example::

        with torchport.shim.redirect_cuda() as shim:
            run_cuda_only_code()
        shim.report.print()
    """
    owner = active() is None
    shim = install(device, **kwargs)
    try:
        yield shim
    finally:
        if owner:
            uninstall()


def _refuse_foreign_shim() -> None:
    from torchport import backends

    try:
        foreign = backends.get("cuda").shim_active()
    except Exception:
        foreign = False
    if foreign:
        raise ShimError(
            "torch.cuda is already redirected by another shim (typically torch_npu's "
            "`from torch_npu.contrib import transfer_to_npu`). Remove that import: torchport's shim "
            "replaces it, and the two must not be stacked."
        )
