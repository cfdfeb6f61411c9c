"""torch_npu, as provided by torchport's emulated NPU (no Ascend runtime; tensors live in host memory).

Loaded under the name ``torch_npu`` by the stand-in import hook (``torchport/emulate/_standin.py``)
only while the emulator is installed. ``torch_npu.npu`` is ``torch.npu``.
"""

import torch

if not getattr(getattr(torch, "npu", None), "__torchport_emulated__", False) or not torch.npu.is_available():
    raise ImportError(
        "torch_npu (torchport stand-in): the emulated NPU is not installed; set TORCHPORT_EMULATE=npu "
        "or call torchport.emulate.install()")

from torchport.emulate import _formats

__torchport_emulated__ = True
__version__ = "2.14.0+torchport.emulated"
__all__ = ["npu", "npu_format_cast", "npu_format_cast_", "get_npu_format", "npu_fusion_attention",
           "npu_prompt_flash_attention", "empty_with_format", "get_storage_size", "profiler", "optim", "contrib",
           "utils", "erase_stream"]

npu = torch.npu
npu_format_cast = _formats.npu_format_cast
npu_format_cast_ = _formats.npu_format_cast_
get_npu_format = _formats.get_npu_format

from ._fusion_attention import npu_fusion_attention  # noqa: E402  (transformers imports it at load time)
from ._custom_ops import empty_with_format, get_storage_size, npu_prompt_flash_attention  # noqa: E402

from . import _C, contrib, optim, profiler, utils  # noqa: E402,F401  (as torch_npu's own __init__ imports them)
from . import _ops  # noqa: E402

_ops.install(__import__("sys").modules[__name__])  # every custom op of the wheel (refused ones raise one line)

erase_stream = torch.npu.utils._erase_stream
