"""CPU: always present; the fallback of last resort (and the one users must be warned about)."""

from __future__ import annotations

import os

from torchport.backends.spec import AmpPolicy, BackendSpec


def _module():
    import torch

    return torch.cpu


SPEC = BackendSpec(
    name="cpu",
    priority=0,
    probe=lambda: True,
    module=_module,
    device_count=lambda: 1,
    dist_backend="gloo",
    visible_devices_env=None,
    # CPU autocast runs bf16 (fast on AVX512-BF16/AMX); fp16 is slow, so fp16 falls back to bf16.
    amp=AmpPolicy(low_precision=("bf16",), fp16_needs_scaler=False, auto_order=(), fallback="bf16"),
    pin_memory=False,
    data_parallel=False,
    is_accelerator=False,
    compile_backend="inductor",
    doctor_facts=lambda: {"cpu_count": os.cpu_count(), "torch_threads": __import__("torch").get_num_threads()},
)
