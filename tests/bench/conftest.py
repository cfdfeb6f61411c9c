"""Timing tests run torch single-threaded.

On a small, shared CI host (2 cores, other jobs running) OpenMP's second thread spins
waiting for a busy core and a 2 ms forward pass turns into 200 ms now and then, which
makes phase shares random. One thread is slower but steady.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
