"""Fixtures for the emulated-NPU tests (the lead owns tests/conftest.py; helpers live in emu_helpers.py)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _leave_no_emulator_behind():
    """Every test starts and ends without an emulator, unless TORCHPORT_EMULATE installed one."""
    import torchport.emulate as emulate

    from_env = bool(os.environ.get("TORCHPORT_EMULATE"))
    yield
    if emulate.is_installed() and not from_env:
        emulate.uninstall()


@pytest.fixture(autouse=True)
def _torch_backend_flags_stay_mutable():
    """torch_npu.testing imports torch's test helpers, which freeze torch.backends' flags for the whole
    process (``disable_global_flags()``): undo that after each test so later tests -- in any directory --
    may still set cudnn flags (tests/shim's CUDA script and tests/runtime's tuning test failed after
    test_emu_memory's TestCase import)."""
    import torch

    frozen = torch.backends.flags_frozen()
    yield
    if torch.backends.flags_frozen() and not frozen:  # torch has no public inverse of disable_global_flags()
        torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True


@pytest.fixture
def npu2():
    """Two emulated devices for one test; yields ``torch.npu``."""
    import torchport.emulate as emulate

    with emulate.emulated(devices=2) as npu:
        yield npu
