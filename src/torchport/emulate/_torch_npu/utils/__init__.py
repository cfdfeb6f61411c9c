"""``torch_npu.utils`` (emulated): the helpers scripts and torch_npu's tests import from it."""

from torch_npu.utils.collect_env import get_cann_version  # noqa: F401

__torchport_emulated__ = True
__all__ = ["get_cann_version"]
