"""Processes a script under ``torchport run`` starts itself (``torch.multiprocessing.spawn``) get the shim too.

The DDP tutorials launch their ranks with ``mp.spawn``: fresh interpreters that never saw the parent's
shim, so ``.cuda()`` / ``.to(rank)`` / ``backend="nccl"`` used to fail in every rank ("Found no NVIDIA
driver"). The scripts below are unmodified CUDA code; only the command line changes.
"""

from __future__ import annotations

import json
import socket
import textwrap

from shim_helpers import require_emulator, run_cli

DDP_SPAWN = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    def rank_main(rank, world, out, port):
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
        torch.cuda.set_device(rank)
        dist.init_process_group(backend="nccl", rank=rank, world_size=world)
        torch.manual_seed(0)
        data = TensorDataset(torch.randn(32, 6), torch.randn(32, 1))
        loader = DataLoader(data, batch_size=4, pin_memory=True, sampler=DistributedSampler(data, shuffle=False))
        model = DDP(torch.nn.Linear(6, 1).to(rank), device_ids=[rank])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            x, y = x.to(rank), y.to(rank)
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        w = model.module.weight.detach().cpu()
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            f.write(json.dumps({"device": str(next(model.parameters()).device),
                                "backend": dist.get_backend(), "w": w.tolist()}))
        dist.destroy_process_group()

    if __name__ == "__main__":
        world = torch.cuda.device_count()
        mp.spawn(rank_main, args=(world, sys.argv[1], sys.argv[2]), nprocs=world)
        print("spawned", world)
''')

CUDA_SPAWN = textwrap.dedent('''
    import os, sys
    import torch
    import torch.multiprocessing as mp

    def work(i, out):
        x = torch.ones(3).cuda() * (i + 1)
        with open(os.path.join(out, f"child{i}.txt"), "w") as f:
            f.write(f"{x.device.type} {x.sum().item():.0f}")

    if __name__ == "__main__":
        mp.spawn(work, args=(sys.argv[1],), nprocs=2)
''')


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_spawned_children_run_cuda_code_on_the_selected_device(tmp_path):
    script = tmp_path / "spawn_cuda.py"
    script.write_text(CUDA_SPAWN)
    proc = run_cli(["run", "--device", "cpu", "--json", str(tmp_path / "r.json"), str(script), str(tmp_path)],
                   cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "NVIDIA driver" not in proc.stderr
    assert sorted(p.read_text() for p in tmp_path.glob("child*.txt")) == ["cpu 3", "cpu 6"]
    doc = json.loads((tmp_path / "r.json").read_text())
    rec = {r["api"]: r for r in doc["redirects"]}
    assert rec["torch.Tensor.cuda"]["count"] == 2  # the children's calls are in the parent's report
    assert rec["torch.Tensor.cuda"]["first_call_site"] == "spawn_cuda.py:7"
    assert any("2 child process(es)" in n for n in doc["notes"])


def test_ddp_tutorial_with_mp_spawn_on_two_emulated_npus(tmp_path):
    require_emulator()
    script = tmp_path / "ddp_spawn.py"
    script.write_text(DDP_SPAWN)
    proc = run_cli(["run", "--json", str(tmp_path / "r.json"), str(script), str(tmp_path), _port()],
                   env={"TORCHPORT_EMULATE": "npu:2", "OMP_NUM_THREADS": "1"}, cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "spawned 2" in proc.stdout
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["device"] for r in ranks] == ["npu:0", "npu:1"]
    assert {r["backend"] for r in ranks} == {"hccl"}
    assert ranks[0]["w"] == ranks[1]["w"]  # DDP kept the replicas identical
    rec = {r["api"]: r for r in json.loads((tmp_path / "r.json").read_text())["redirects"]}
    assert rec["torch.distributed.init_process_group"]["example"] == "'nccl' -> hccl"
    assert rec["torch.cuda.set_device"]["count"] == 2
