"""Interpreter-start hook of torchport (run by ``torchport-emulate.pth``).

Does nothing unless one of two variables is set. ``TORCHPORT_EMULATE``: ``import torch_npu`` works
even before ``import torch`` (see ``torchport/emulate/_standin.py``). ``TORCHPORT_RUN_CHILD``: this
interpreter was started by a script under ``torchport run`` (``mp.spawn`` ...) and gets the same
shim (see ``torchport/shim/child.py``). Kept tiny: it runs in every interpreter.
"""

import os

if os.environ.get("TORCHPORT_EMULATE"):
    try:
        from torchport.emulate._standin import boot

        boot()
    except Exception:  # never break interpreter start-up
        pass

if os.environ.get("TORCHPORT_RUN_CHILD"):
    try:
        from torchport.shim.child import boot as _shim_boot

        _shim_boot()
    except Exception:  # never break interpreter start-up (boot() reports its own failures)
        pass
