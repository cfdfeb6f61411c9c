"""torch device-backend autoload hook (entry point group ``torch.backends``).

Runs inside ``import torch`` in every Python process where torchport is installed.
It must do nothing at all unless ``TORCHPORT_EMULATE`` is set.

When the variable is set but the emulator cannot be installed (a malformed value, no C++ compiler for the
first build, a real torch_npu loaded), the process asked for a device it cannot have, and the hook *raises*
(:class:`EmulateError`, one line naming the value, the problem and the fix): library code reports, it does not
end the interpreter -- a notebook kernel, a test runner or a tool that catches import errors can show it and
go on. torch wraps it (``RuntimeError: Failed to load the backend extension: torchport_emulate``, with this
error as its ``__cause__``), so ``import torch`` fails in that process; unset or fix the variable and start a
fresh one. The ``torchport`` command checks the variable before any verb imports torch and stops with that
line and exit code 2 (``USAGE``), never a traceback.
"""

from __future__ import annotations

import os

from torchport.errors import ConfigError


class EmulateError(ConfigError):
    """``TORCHPORT_EMULATE`` is set but the emulated NPU cannot be installed (the message says why and the fix)."""


def autoload() -> None:
    """Install the emulated NPU when ``TORCHPORT_EMULATE=npu[:N]`` is set; otherwise return at once.

    Raises:
        EmulateError: the variable is set, but its value is malformed or the emulator cannot be installed.
    """
    if not os.environ.get("TORCHPORT_EMULATE"):
        return
    from torchport.emulate import install_from_env

    try:
        install_from_env(verify_autograd=False)
    except Exception as exc:  # noqa: BLE001 -- reported as one error naming the variable
        value = os.environ.get("TORCHPORT_EMULATE")
        raise EmulateError(f"TORCHPORT_EMULATE={value}: {exc}") from exc
