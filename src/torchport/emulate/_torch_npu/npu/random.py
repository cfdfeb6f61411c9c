"""``torch_npu.npu.random`` (emulated): the device-generator functions of ``torch.npu``."""

import torch

__torchport_emulated__ = True
__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


def __getattr__(name):
    if name in __all__ or name == "default_generators":
        return getattr(torch.npu, name)
    raise AttributeError(f"module 'torch_npu.npu.random' has no attribute {name!r}")
