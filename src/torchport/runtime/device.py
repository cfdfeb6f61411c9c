"""Device selection: which backend and which device index this process runs on.

Auto order follows backend priority (``torchport.backends.names()``, highest first). Environment:

* ``TORCHPORT_DEVICE`` -- ``auto`` (default), a backend name, or ``name:index``.
* ``TORCHPORT_REQUIRE_ACCELERATOR`` -- ``1``/``true`` turns "no accelerator, running
  on CPU" into an error instead of a warning and a 10x slower CPU run.
* ``LOCAL_RANK`` (set by torchrun) -- picks the device index.

Example::

    import torchport
    target = torchport.select_device()      # Target(npu:0) on Ascend, Target(cuda:0) on a GPU box
    model = model.to(target.device)
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import warnings
from types import ModuleType

from typing import TYPE_CHECKING

from torchport import backends
from torchport.backends.spec import BackendSpec, BackendUnavailable
from torchport.env import env_flag, env_int  # noqa: F401  (re-exported: older import sites)
from torchport.errors import ConfigError
from torchport.errors import ExitCode
from torchport.log import user_stacklevel

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "Target",
    "select_device",
    "current",
    "device",
    "reset_selection",
    "NoAcceleratorError",
    "CPUFallbackWarning",
    "ConfigError",
    "env_flag",
    "env_int",
]

class NoAcceleratorError(RuntimeError):
    """Require-accelerator mode is on and only the CPU is available."""

    exit_code = ExitCode.NO_ACCELERATOR


class CPUFallbackWarning(UserWarning):
    """No accelerator was found and the job runs on CPU."""


@dataclasses.dataclass(frozen=True)
class Target:
    """The selected backend and device index.

    Attributes:
        backend: the backend record (:class:`~torchport.backends.BackendSpec`).
        index: device index within the backend (0 for cpu).
        reason: how it was chosen (``"auto"``, ``"argument"``, ``"TORCHPORT_DEVICE"``).
    """

    backend: BackendSpec
    index: int = 0
    reason: str = "auto"

    @property
    def type(self) -> str:
        """torch device type string."""
        return self.backend.name

    @functools.cached_property
    def device(self):
        """The ``torch.device`` (``cpu`` has no index)."""
        import torch

        return torch.device(self.type) if not self.backend.is_accelerator else torch.device(self.type, self.index)

    @property
    def module(self) -> ModuleType | None:
        """The torch device module of the backend (e.g. ``torch.cpu``)."""
        return self.backend.module()

    @property
    def is_accelerator(self) -> bool:
        """False when running on CPU."""
        return self.backend.is_accelerator

    def __str__(self) -> str:
        return f"{self.backend.label}:{self.index}" if self.is_accelerator else self.backend.label


_lock = threading.RLock()
_current: Target | None = None


def _parse(spec: str, source: str) -> tuple[str, int | None]:
    name, _, idx = spec.strip().partition(":")
    if idx:
        try:
            return name.lower(), int(idx)
        except ValueError:
            raise ConfigError(f"{source}={spec!r}: device index {idx!r} is not an integer (expected NAME:INDEX, e.g. '{name.lower()}:1')") from None
    return name.lower(), None


def select_device(
    name: str | None = None,
    *,
    require_accelerator: bool | None = None,
    index: int | None = None,
    warn: bool = True,
) -> Target:
    """Choose the backend and device for this process and make it the current one.

    Args:
        name: ``"auto"``, a backend name or ``"name:index"``; default ``TORCHPORT_DEVICE`` or auto.
        require_accelerator: raise instead of running on CPU; default
            ``TORCHPORT_REQUIRE_ACCELERATOR``.
        index: device index; default the one in ``name``, else ``LOCAL_RANK`` modulo the
            device count, else 0. Given explicitly on an accelerator, it also becomes the
            backend's current device (what the backend module's ``set_device(i)`` does), so calls that
            take no device (streams, ``synchronize``, collectives) use it too.
        warn: emit :class:`CPUFallbackWarning` when auto selection lands on CPU.

    Returns:
        The :class:`Target`, also remembered for :func:`current`.

    Raises:
        UnknownBackendError: the name is not registered (lists the known ones).
        BackendUnavailable: the named backend cannot run here (says what to install).
        NoAcceleratorError: require-accelerator mode and no accelerator.
        ConfigError: a malformed environment variable (named in the message).

    Note:
        On a CUDA build of torch without a GPU, ``torch.accelerator`` still reports
        ``cuda``; selection always checks real availability.
    """
    global _current
    import torch  # noqa: F401  (torch's device-backend autoload may register backends, e.g. the emulator)

    reason = "argument"
    if name is None:
        env = os.environ.get("TORCHPORT_DEVICE")
        name, reason = (env, "TORCHPORT_DEVICE") if env and env.strip() else ("auto", "auto")
    if require_accelerator is None:
        require_accelerator = env_flag("TORCHPORT_REQUIRE_ACCELERATOR")
    source = "TORCHPORT_DEVICE" if reason == "TORCHPORT_DEVICE" else "device"
    key, name_index = _parse(name, source)
    if key == "auto":
        spec = next(s for s in backends.specs() if s.probe())
        reason = "auto" if reason == "argument" else reason
    else:
        spec = backends.get(key)
        if not spec.probe():
            raise BackendUnavailable(
                f"{source}={name!r}: backend {spec.name!r} is not available here. {spec.install_hint}".strip()
            )
    if not spec.is_accelerator:
        if require_accelerator:
            raise NoAcceleratorError(
                "require-accelerator mode is on (TORCHPORT_REQUIRE_ACCELERATOR or require_accelerator=True) "
                f"but no accelerator is available (checked: {', '.join(s.name for s in backends.specs() if s.is_accelerator)}). "
                "Run `torchport doctor` to see why; unset the requirement to run on CPU."
            )
        if key == "auto" and warn:
            warnings.warn(
                "no accelerator found: running on CPU, which is typically 10-50x slower. "
                "Run `torchport doctor` to see why, or set TORCHPORT_REQUIRE_ACCELERATOR=1 to make this an error.",
                CPUFallbackWarning,
                stacklevel=user_stacklevel(),   # the user's line, past torchport's own frames
            )
    explicit_index = index is not None
    if index is None:
        index = name_index
    if index is None:
        local = env_int("LOCAL_RANK")
        count = max(1, spec.device_count())
        index = (local % count) if (local is not None and spec.is_accelerator) else 0
    if spec.is_accelerator and index >= max(1, spec.device_count()):
        raise BackendUnavailable(
            f"device {spec.name}:{index} does not exist: {spec.device_count()} visible"
            + (f" (check {spec.visible_devices_env})" if spec.visible_devices_env else "")
        )
    target = Target(backend=spec, index=0 if not spec.is_accelerator else index, reason=reason)
    if explicit_index and spec.is_accelerator and target.module is not None:
        target.module.set_device(index)
    with _lock:
        _current = target
    return target


def current() -> Target:
    """The current :class:`Target`, selecting one (auto / environment) on first use."""
    with _lock:
        if _current is not None and backends.get(_current.type) is _current.backend:
            return _current
    return select_device()


def device() -> "torch.device":
    """Shortcut for ``current().device`` (a ``torch.device``)."""
    return current().device


def reset_selection() -> None:
    """Forget the current selection (the next :func:`current` selects again)."""
    global _current
    with _lock:
        _current = None
