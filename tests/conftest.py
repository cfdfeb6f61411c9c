"""Shared test configuration.

Device-parametrised tests use the ``portable_device`` fixture from the torchport pytest
plugin (``torchport.emulate.pytest_plugin``): cpu, emulated npu, and cuda when present.
"""

from __future__ import annotations

import os

import pytest

# Tests must never pick up a developer's device settings by accident.
for _var in ("TORCHPORT_DEVICE", "TORCHPORT_REQUIRE_ACCELERATOR", "TORCHPORT_EMULATE"):
    os.environ.pop(_var, None)


@pytest.fixture(autouse=True)
def _fresh_selection():
    """Each test starts with no remembered device selection."""
    from torchport.runtime.device import reset_selection

    reset_selection()
    yield
    reset_selection()
