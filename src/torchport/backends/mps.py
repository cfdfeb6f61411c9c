"""Apple silicon GPUs (Metal Performance Shaders)."""

from __future__ import annotations

from torchport.backends._util import torch_module
from torchport.backends.spec import AmpPolicy, BackendSpec


def _available() -> bool:
    import torch

    try:
        return bool(torch.backends.mps.is_available())
    except Exception:
        return False


SPEC = BackendSpec(
    name="mps",
    priority=40,
    probe=_available,
    module=lambda: torch_module("mps"),
    device_count=lambda: 1 if _available() else 0,
    dist_backend="gloo",
    visible_devices_env=None,
    # fp16 autocast works on MPS and needs no scaler for typical CNNs only at small LR; keep it scaled.
    amp=AmpPolicy(low_precision=("fp16", "bf16"), fp16_needs_scaler=True, auto_order=("fp16",)),
    pin_memory=False,
    data_parallel=False,
    install_hint="MPS needs macOS 12.3+ on Apple silicon and a torch build with MPS enabled.",
    compile_backend="inductor",
)
