"""``torch_npu._C``: the private names Ascend scripts call directly."""

import types

import torch

from torchport.emulate._state import STATE

__torchport_emulated__ = True
#: Ascend910B3's SoC version number (torch_npu.npu.utils.get_soc_version)
SOC_VERSION = 223


def _npu_get_soc_version() -> int:
    return SOC_VERSION


def _npu_getDeviceCount() -> int:  # noqa: N802 - torch_npu's name
    return torch.npu.device_count()


def _npu_getLocalDevice() -> int:  # noqa: N802
    return torch.npu.current_device()


def _npu_getDevice() -> int:  # noqa: N802
    return torch.npu.current_device()


def _npu_setDevice(index: int) -> None:  # noqa: N802
    torch.npu.set_device(index)


def _npu_synchronize() -> None:
    torch.npu.synchronize()


def _npu_emptyCache() -> None:  # noqa: N802
    torch.npu.empty_cache()


def _npu_hostEmptyCache() -> None:  # noqa: N802
    pass


def _npu_is_jit_compile_false() -> bool:
    return torch.npu.is_jit_compile_false()


def _npu_getCheckNpuOverflow() -> bool:  # noqa: N802
    return bool(STATE.overflow_flag)


def _npu_getCurrentRawStream(device_index: int) -> int:  # noqa: N802
    return torch.npu.current_stream(device_index).npu_stream


_npu_getCurrentRawStreamNoWait = _npu_getCurrentRawStream


def _card_error(sub: int, code: int) -> str:
    """torch_npu's error suffix (``ERR<sub><code> ...``), as the card appends it."""
    return STATE.native.card_error(sub, code)


def _npu_eraseStream(tensor: torch.Tensor, stream_id: int, device_index: int, device_type: int) -> None:  # noqa: N802
    """Check the stream names one the device handed out (the card's check); nothing is cached to erase."""
    torch.npu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def _get_device_index_of_current_thread() -> int:
    return torch.npu.current_device()


_distributed_c10d = types.SimpleNamespace(ProcessGroupHCCL=None)
try:
    import torch.distributed as _dist

    _distributed_c10d.ProcessGroupHCCL = getattr(_dist, "ProcessGroupGloo", None)
except Exception:  # pragma: no cover - torch without distributed
    pass
