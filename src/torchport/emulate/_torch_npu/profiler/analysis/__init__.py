"""``torch_npu.profiler.analysis`` (emulated): the parts of torch_npu's trace post-processing that
scripts and tests import. The emulator writes torch's own trace files; there is no msprof data to parse."""

__torchport_emulated__ = True
__all__ = []
