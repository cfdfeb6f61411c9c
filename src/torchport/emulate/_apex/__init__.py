"""The ``apex`` stand-in: served by the emulator's import hook (``_standin.py``) only while the
emulator is on and no real apex is installed, so Ascend ModelZoo scripts (``from apex import amp``)
run unchanged on the emulated device: ``apex.amp`` (see its ``amp.py``), ``apex.parallel`` (torch's DDP and
SyncBatchNorm), ``apex.optimizers`` (fused optimizers as torch's, Ascend's ``NpuFused*``), ``apex.fp16_utils``
(``to_python_float`` ...) and ``apex.multi_tensor_apply`` (no fused kernels: ``available`` is False)."""

# ``import apex`` then ``apex.parallel.convert_syncbn_model(...)`` / ``apex.optimizers.NpuFusedSGD(...)``, as apex
from . import amp, contrib, fp16_utils, multi_tensor_apply, optimizers, parallel  # noqa: F401

__torchport_emulated__ = True
