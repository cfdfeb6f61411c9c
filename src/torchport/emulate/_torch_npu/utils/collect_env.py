"""``torch_npu.utils.collect_env`` (emulated): environment facts; there is no CANN under the emulator."""

import torch

__torchport_emulated__ = True
__all__ = ["get_cann_version", "get_torch_npu_version", "get_env_info"]

#: what ``get_cann_version`` answers: no CANN toolkit is installed (a string compares below every release)
NO_CANN = ""


def get_cann_version(module: str = "CANN") -> str:
    """The CANN version string; ``""`` on the emulator (no toolkit), so ``get_cann_version() < "8.0"`` holds."""
    return NO_CANN


def get_torch_npu_version() -> str:
    import torch_npu

    return torch_npu.__version__


def get_env_info() -> dict:
    return {"torch_version": torch.__version__, "torch_npu_version": get_torch_npu_version(),
            "cann_version": NO_CANN, "device": torch.npu.get_device_name(0), "device_count": torch.npu.device_count()}
