"""``torch_npu.npu.random`` (emulated): the device-generator functions of ``torch.npu``."""

import torch
from torch.npu import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all,  # noqa: F401
                       seed, seed_all, set_rng_state, set_rng_state_all)

__torchport_emulated__ = True
__all__ = ["get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


def __getattr__(name):
    if name == "default_generators":
        return torch.npu.default_generators
    raise AttributeError(f"module 'torch_npu.npu.random' has no attribute {name!r}")
