"""2-process DDP over the emulated ``hccl`` backend, launched with torchrun and TORCHPORT_EMULATE=npu:2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_ddp_two_processes_over_hccl(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE"))}
    env.update({"TORCHPORT_EMULATE": "npu:2", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parents[1])})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(HERE / "emu_ddp_worker.py"), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r, res in enumerate(results):
        assert res["rank"] == r and res["world"] == 2 and res["backend"] == "hccl"
        assert res["device"] == f"npu:{r}"  # each rank trains on its own emulated card
        assert res["allreduce"] == [3.0] * 4  # 1 + 2
        assert res["params_equal_across_ranks"] is True  # gradients were averaged
    assert results[0]["losses"] != results[1]["losses"]  # different data per rank
