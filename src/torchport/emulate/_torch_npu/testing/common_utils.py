"""``torch_npu.testing.common_utils`` (emulated): device selection and decorators of torch_npu's tests."""

from __future__ import annotations

import contextlib
import functools
import os
import unittest
from itertools import product

import numpy as np
import torch
import torch_npu

__torchport_emulated__ = True
__all__ = ["check_operators_in_prof", "freeze_rng_state", "iter_indices", "is_iterable", "set_npu_device", "get_npu_device",
           "create_common_tensor", "create_dtype_tensor", "SupportedDevices", "SkipIfNotGteCANNVersion"]


@contextlib.contextmanager
def freeze_rng_state():
    """Restore the CPU generator's state on exit."""
    state = torch.get_rng_state()
    try:
        yield
    finally:
        torch.set_rng_state(state)


def iter_indices(tensor):
    if tensor.dim() == 0:
        return range(0)
    if tensor.dim() == 1:
        return range(tensor.size(0))
    return product(*(range(s) for s in tensor.size()))


def is_iterable(obj) -> bool:
    try:
        iter(obj)
    except TypeError:
        return False
    return True


def get_npu_device() -> str:
    """``npu:<SET_NPU_DEVICE>`` (default ``npu:0``)."""
    index = os.environ.get("SET_NPU_DEVICE")
    return "npu:0" if index is None else f"npu:{index}"


def set_npu_device() -> str:
    device = get_npu_device()
    torch.npu.set_device(device)
    return device


def create_common_tensor(item, min_value, max_value, device=None):
    """``item = (numpy dtype, npu format, shape)`` -> ``(cpu tensor, npu tensor)`` with the same values."""
    dtype, npu_format, shape = item[0], item[1], item[2]
    data = np.random.uniform(min_value, max_value, shape).astype(dtype)
    cpu = torch.from_numpy(data)
    npu = torch.from_numpy(data.copy()).to(device or get_npu_device())
    if npu_format != -1:
        npu = torch_npu.npu_format_cast(npu, npu_format)
    return cpu, npu


def create_dtype_tensor(shape, dtype, npu_format=-1, min_value=-5, max_value=5, no_zero=False, device=None):
    """A random ``dtype`` tensor on cpu and its npu copy."""
    if dtype == torch.bool:
        cpu = torch.randint(0, 2, shape).bool()
    elif dtype.is_floating_point:
        cpu = torch.empty(shape, dtype=torch.float32).uniform_(min_value, max_value).to(dtype)
    else:
        cpu = torch.randint(min_value, max_value, shape).to(dtype)
    if no_zero and dtype != torch.bool:
        cpu = torch.where(cpu == 0, torch.ones_like(cpu), cpu)
    npu = cpu.to(device or get_npu_device())
    if npu_format != -1:
        npu = torch_npu.npu_format_cast(npu, npu_format)
    return cpu, npu


def check_operators_in_prof(expected_operators, prof, unexpected_operators=None):
    """torch_npu's test helper: True when every name in ``expected_operators`` is a profiler event of ``prof``
    (``cached_`` prefix ignored) and none of ``unexpected_operators`` is. torch_npu's tests name the card's
    kernels (``contiguous_d_Transpose``, ``aclnnInplaceCopy``); the emulator runs host kernels, whose events are
    aten names, so for those it answers False, as a card would if another kernel had run."""
    events = {item.key.replace("cached_", "") for item in prof.key_averages()}
    if events & set(unexpected_operators or ()):
        return False
    return set(expected_operators) <= events


def _short_device_name() -> str:
    name = torch.npu.get_device_name(0)
    if name.startswith("Ascend910_"):
        return name[:12]
    if name.startswith("Ascend950"):
        return name[:9]
    return name[:10]


class SupportedDevices:
    """Skip a test unless the card's short name (``Ascend910B``...) is in ``supported_devices``."""

    def __init__(self, supported_devices):
        self.supported_devices = list(supported_devices)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(slf, *args, **kwargs):
            name = _short_device_name()
            if name not in self.supported_devices:
                raise unittest.SkipTest(f"Only run on {self.supported_devices!r}, current device is {name}.")
            return fn(slf, *args, **kwargs)

        return wrapper


class SkipIfNotGteCANNVersion:
    """Skip unless the CANN version is at least ``base_version`` (the emulator reports none: always skips)."""

    def __init__(self, base_version, module="CANN"):
        self.base_version, self.module = base_version, module

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(slf, *args, **kwargs):
            raise unittest.SkipTest(f"Only run on {self.module} {self.base_version} or greater; the emulated NPU "
                                    "has no CANN")

        return wrapper
