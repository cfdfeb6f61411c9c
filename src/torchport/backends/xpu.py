"""Intel GPUs (torch.xpu, collectives over XCCL)."""

from __future__ import annotations

from torchport.backends._util import torch_module
from torchport.backends.spec import AmpPolicy, BackendSpec


def _available() -> bool:
    mod = torch_module("xpu")
    try:
        return bool(mod is not None and mod.is_available())
    except Exception:
        return False


def _count() -> int:
    return torch_module("xpu").device_count() if _available() else 0


SPEC = BackendSpec(
    name="xpu",
    priority=60,
    probe=_available,
    module=lambda: torch_module("xpu"),
    device_count=_count,
    dist_backend="xccl",
    visible_devices_env="ZE_AFFINITY_MASK",
    amp=AmpPolicy(low_precision=("fp16", "bf16"), fp16_needs_scaler=True, auto_order=("bf16", "fp16")),
    pin_memory=True,
    data_parallel=False,
    install_hint="Install torch with XPU support (the xpu wheel index) and Intel GPU drivers.",
    compile_backend="inductor",
)
