import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchport
from torchport.runtime.distributed import DataParallelUnsupported

HERE = Path(__file__).parent


def test_two_process_ddp_gloo_on_cpu(tmp_path):
    env = {**os.environ, "TORCHPORT_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
           str(HERE / "_ddp_worker.py"), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2))
    assert r0["backend"] == r1["backend"] == "gloo"
    assert r0["world"] == 2 and r0["main"] and not r1["main"]
    assert r0["weight"] == r1["weight"]  # gradients were averaged across ranks
    assert r0["mean_rank"] == r1["mean_rank"] == 0.5


def test_not_distributed_helpers_are_single_process():
    t = torchport.init_distributed("cpu")
    assert t.type == "cpu"
    assert torchport.rank() == 0 and torchport.world_size() == 1 and torchport.is_main_process()
    model = torch.nn.Linear(2, 2)
    assert torchport.wrap_ddp(model) is model
    torchport.barrier()


def test_data_parallel_points_to_ddp():
    torchport.select_device("cpu")
    with pytest.raises(DataParallelUnsupported, match="DistributedDataParallel.*torchrun"):
        torchport.data_parallel(torch.nn.Linear(2, 2))


def test_dist_backend_follows_device():
    from torchport.runtime.distributed import dist_backend

    assert dist_backend(torchport.select_device("cpu")) == "gloo"
