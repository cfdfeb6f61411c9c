"""Shared test configuration.

Device-parametrised tests use the ``portable_device`` fixture from the torchport pytest
plugin (``torchport.emulate.pytest_plugin``): cpu, emulated npu, and cuda when present.
"""

from __future__ import annotations

import os

import pytest

# Tests must never pick up a developer's device settings by accident -- nor a golden-update switch left
# in the shell: with TORCHPORT_UPDATE_GOLDEN set, every golden test would pass by rewriting its file.
for _var in ("TORCHPORT_DEVICE", "TORCHPORT_REQUIRE_ACCELERATOR", "TORCHPORT_EMULATE", "TORCHPORT_UPDATE_GOLDEN"):
    os.environ.pop(_var, None)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files (fixtures, tests/golden/*) from the current output instead of "
                          "comparing; the only way to turn updating on (TORCHPORT_UPDATE_GOLDEN is cleared)")


def pytest_configure(config):
    if config.getoption("--update-golden"):
        os.environ["TORCHPORT_UPDATE_GOLDEN"] = "1"


@pytest.fixture(autouse=True)
def _fresh_selection():
    """Each test starts with no remembered device selection."""
    from torchport.runtime.device import reset_selection

    reset_selection()
    yield
    reset_selection()
