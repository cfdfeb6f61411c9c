"""2-process DDP over the emulated ``hccl`` backend, launched with torchrun and TORCHPORT_EMULATE=npu:2."""

from __future__ import annotations

import pytest
from emu_helpers import torchrun_two_npus


@pytest.mark.slow
def test_ddp_two_processes_over_hccl(tmp_path):
    results = torchrun_two_npus("emu_ddp_worker.py", tmp_path)
    for r, res in enumerate(results):
        assert res["rank"] == r and res["world"] == 2 and res["backend"] == "hccl"
        assert res["device"] == f"npu:{r}"  # each rank trains on its own emulated card
        assert res["allreduce"] == [3.0] * 4  # 1 + 2
        assert res["params_equal_across_ranks"] is True  # gradients were averaged
    assert results[0]["losses"] != results[1]["losses"]  # different data per rank
