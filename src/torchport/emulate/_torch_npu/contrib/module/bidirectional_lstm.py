"""``torch_npu.contrib.module.bidirectional_lstm`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import BiLSTM  # noqa: F401

__torchport_emulated__ = True
__all__ = ["BiLSTM"]
