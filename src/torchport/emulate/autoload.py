"""torch device-backend autoload hook (entry point group ``torch.backends``).

Runs inside ``import torch`` in every Python process where torchport is installed.
It must do nothing at all unless ``TORCHPORT_EMULATE`` is set.
"""

from __future__ import annotations

import os


def autoload() -> None:
    """Install the emulated NPU when ``TORCHPORT_EMULATE=npu[:N]`` is set; otherwise return at once."""
    if not os.environ.get("TORCHPORT_EMULATE"):
        return
    from torchport.emulate import install_from_env

    install_from_env(verify_autograd=False)
