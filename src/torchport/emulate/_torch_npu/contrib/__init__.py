"""``torch_npu.contrib`` (emulated): ``transfer_to_npu`` is imported explicitly, as with torch_npu."""

__torchport_emulated__ = True
__all__ = []
