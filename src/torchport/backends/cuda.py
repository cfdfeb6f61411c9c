"""NVIDIA CUDA (and ROCm builds, which also use the ``cuda`` device type)."""

from __future__ import annotations

from typing import Any, Callable

from torchport.backends.spec import AmpPolicy, BackendSpec


def _real_device_count() -> int:
    """Count CUDA devices without creating a context, even when a shim patched torch.cuda.

    NVML first (fork-safe, no CUDA init); the runtime count only when NVML is unusable.
    """
    import torch

    if not torch.backends.cuda.is_built() and getattr(torch.version, "hip", None) is None:
        return 0
    nvml = getattr(torch.cuda, "_device_count_nvml", None)
    if nvml is not None:
        try:
            n = nvml()
            if n >= 0:
                return n
        except Exception:
            pass
    try:
        return int(torch._C._cuda_getDeviceCount())
    except Exception:
        return 0


def _module():
    import torch

    return torch.cuda


def _bf16_fast() -> bool:
    import torch

    try:
        return _real_device_count() > 0 and torch.cuda.get_device_capability()[0] >= 8
    except Exception:
        return False


def _shim_active() -> bool:
    """True when a CUDA->other-device shim (e.g. torch_npu's transfer_to_npu) patched torch.cuda."""
    import torch

    fn = getattr(torch.cuda, "is_available", None)
    mod = getattr(fn, "__module__", None) or "torch.cuda"
    # torchport's own shim is reported by the shim itself, not as a foreign patch
    return not (mod.startswith("torch.cuda") or mod.startswith("torchport.shim"))


def _facts() -> dict:
    import torch

    facts: dict = {"cuda_built": torch.version.cuda, "hip": getattr(torch.version, "hip", None)}
    if _shim_active():
        facts["problems"] = [{
            "id": "cuda-shim-active",
            "problem": "torch.cuda is redirected by a foreign shim (e.g. torch_npu's transfer_to_npu); libraries "
                       "that test torch.cuda.is_available() may take CUDA-only paths (accelerate#3020).",
            "fix": "prefer `torchport run` (reversible, caller-aware) or migrate the code with `torchport fix`.",
        }]
    n = _real_device_count()
    facts["devices"] = n
    if n:
        try:
            facts["names"] = [torch.cuda.get_device_name(i) for i in range(n)]
        except Exception as exc:  # driver present but unusable
            facts["error"] = str(exc)
    return facts


def _set_attr(path: str) -> Callable[[Any], bool]:
    """A knob setter for ``torch.<path> = value`` (False when this torch build lacks it)."""
    def setter(value: Any) -> bool:
        import torch

        owner_path, _, attr = path.rpartition(".")
        owner = torch
        for part in owner_path.split("."):
            owner = getattr(owner, part, None)
            if owner is None:
                return False
        if not hasattr(owner, attr):
            return False
        setattr(owner, attr, value)
        return True

    return setter


#: torchport.tune() knobs: cuDNN autotuning and determinism, TF32 matmuls and convolutions.
KNOBS = {
    "cudnn_benchmark": _set_attr("backends.cudnn.benchmark"),
    "cudnn_deterministic": _set_attr("backends.cudnn.deterministic"),
    "matmul_allow_tf32": _set_attr("backends.cuda.matmul.allow_tf32"),
    "cudnn_allow_tf32": _set_attr("backends.cudnn.allow_tf32"),
}

SPEC = BackendSpec(
    name="cuda",
    priority=80,
    probe=lambda: _real_device_count() > 0,
    module=_module,
    device_count=_real_device_count,
    dist_backend="nccl",
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    amp=AmpPolicy(low_precision=("fp16", "bf16"), fp16_needs_scaler=True, auto_order=("bf16", "fp16"), bf16_probe=_bf16_fast),
    pin_memory=True,
    data_parallel=True,
    install_hint="Install a CUDA build of torch (pip install torch) and an NVIDIA driver; check nvidia-smi.",
    compile_backend="inductor",
    graph_api="CUDAGraph",
    doctor_facts=_facts,
    shim_active=_shim_active,
    knobs=KNOBS,
)
