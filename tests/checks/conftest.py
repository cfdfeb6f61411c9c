"""Check tests: small models, few steps, one intra-op thread (the machine is shared, and tiny
kernels on two threads of a busy 2-core box run ~10x slower than on one)."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by the checks' worker processes
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # `checks_targets` must import in any import mode, and in the checks' worker processes
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cpu():
    """The CPU target (selected)."""
    from torchport.runtime.device import select_device

    return select_device("cpu", warn=False)

