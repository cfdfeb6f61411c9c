"""2-process DDP and FSDP2 over the emulated ``hccl`` backend, launched with torchrun and TORCHPORT_EMULATE=npu:2."""

from __future__ import annotations

import pytest
from emu_helpers import torchrun_two_npus


@pytest.mark.slow
def test_ddp_fsdp_and_the_group_api_over_hccl(tmp_path):
    results = torchrun_two_npus("emu_ddp_worker.py", tmp_path)
    for r, res in enumerate(results):
        assert res["rank"] == r and res["world"] == 2 and res["backend"] == "hccl"
        assert res["device"] == f"npu:{r}"  # each rank trains on its own emulated card
        assert res["allreduce"] == [3.0] * 4  # 1 + 2
        assert res["params_equal_across_ranks"] is True  # gradients were averaged
        # FSDP2: the hccl group has a name, so init_device_mesh/DTensor/funcol work; parameters are sharded
        # DTensors and the losses equal DDP's on the same model and data (fp32: to 1e-6 relative).
        fsdp = res["fsdp"]
        assert fsdp["is_dtensor"] and fsdp["local_rows"] == 8 and fsdp["full_rows"] == 16
        assert fsdp["full_device"] == f"npu:{r}"
        assert fsdp["losses"] == pytest.approx(fsdp["ddp_losses"], rel=1e-6)
        # the ProcessGroup API torch_npu's tests use
        api = res["api"]
        assert api["max"] == [1.0]                                      # allreduce(t, op=MAX)
        assert api["int_avg"] == [2, 5] and api["int_avg_dtype"] == "torch.int64"  # (1 + 4) // 2, (5 + 5) // 2
        assert api["premul"] == [1.5]                                   # 0.5 * 1 + 0.5 * 2
        assert api["allgather_opts"] == [1.5, 1.5]
        assert api["grouped"] == [[3.0] * 3, [30.0] * 3, [float(1 - r)] * 4, True]   # _group_start/_group_end
    assert results[0]["fsdp"]["losses"] != results[1]["fsdp"]["losses"]   # different data per rank
    assert results[0]["losses"] != results[1]["losses"]  # different data per rank
