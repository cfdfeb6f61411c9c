"""Fixtures for the shim tests: a pretend accelerator (no test leaves a shim installed: tests/conftest.py).

The emulated npu comes from torchport's pytest plugin (``emulated_npu`` fixture).
"""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest

# The tests import shim_helpers by name: make that work under every pytest import mode.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def pretend_accelerator():
    """A Target that behaves like an accelerator but computes on the CPU.

    It lets the accelerator side of the shim (``torch.cuda.is_available()`` True for user
    code, the idiom landing on "the accelerator") be tested on any machine.
    """
    from torchport.backends import cpu
    from torchport.runtime.device import Target

    spec = dataclasses.replace(cpu.SPEC, is_accelerator=True)
    return Target(backend=spec, index=0, reason="argument")
