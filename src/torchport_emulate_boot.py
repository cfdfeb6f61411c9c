"""Interpreter-start hook of torchport's emulated NPU (run by ``torchport-emulate.pth``).

Does nothing unless ``TORCHPORT_EMULATE`` is set; then ``import torch_npu`` works even before
``import torch`` (see ``torchport/emulate/_standin.py``). Kept tiny: it runs in every interpreter.
"""

import os

if os.environ.get("TORCHPORT_EMULATE"):
    try:
        from torchport.emulate._standin import boot

        boot()
    except Exception:  # never break interpreter start-up
        pass
