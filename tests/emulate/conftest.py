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


@pytest.fixture
def npu2():
    """Two emulated devices for one test; yields ``torch.npu``."""
    import torchport.emulate as emulate

    with emulate.emulated(devices=2) as npu:
        yield npu
