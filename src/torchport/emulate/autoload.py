"""torch device-backend autoload hook (entry point group ``torch.backends``).

Runs inside ``import torch`` in every Python process where torchport is installed.
It must do nothing at all unless ``TORCHPORT_EMULATE`` is set.

When the variable is set but the emulator cannot be installed (no C++ compiler for the first
build, a malformed value, a real torch_npu loaded), the process asked for a device it cannot
have: it stops with one line on stderr naming the problem and the fix, exit code 2 (``USAGE``:
an unavailable device or a bad environment variable). Raising (even ``SystemExit``, which a
caller's ``finally`` may outlive) would leave ``import torch`` half done -- torch's next import then
fails with unrelated errors, or crashes -- so the process ends here, before anything ran.
"""

from __future__ import annotations

import os
import sys


def autoload() -> None:
    """Install the emulated NPU when ``TORCHPORT_EMULATE=npu[:N]`` is set; otherwise return at once."""
    if not os.environ.get("TORCHPORT_EMULATE"):
        return
    from torchport.emulate import install_from_env

    try:
        install_from_env(verify_autograd=False)
    except Exception as exc:  # noqa: BLE001 -- any failure here must not half-import torch
        from torchport.errors import ExitCode

        value = os.environ.get("TORCHPORT_EMULATE")
        sys.stdout.flush()
        sys.stderr.write(f"torchport: error: TORCHPORT_EMULATE={value}: {exc}\n")
        sys.stderr.flush()
        os._exit(int(ExitCode.USAGE))
