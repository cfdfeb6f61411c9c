"""2-process DDP and FSDP2 worker for test_emu_distributed.py: plain Ascend-style code, no torchport import.

Run by torchrun with TORCHPORT_EMULATE=npu:2; writes one JSON file per rank into argv[1].
"""

import gc
import json
import os
import sys

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401  (the emulator's stand-in; real Ascend scripts import it)
from torch.nn.parallel import DistributedDataParallel as DDP


def main(out_dir: str) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.npu.set_device(local_rank)
    dist.init_process_group("hccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("npu", local_rank)

    t = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(t)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4),
    ).to(device)
    ddp = DDP(model, device_ids=[local_rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)  # different data per rank
    losses = []
    for _ in range(3):
        x = torch.randn(4, 3, 8, 8, generator=gen).to(device)
        y = torch.randint(0, 4, (4,), generator=gen).to(device)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    # The ProcessGroup API as torch_npu's tests call it: op= keyword, a bare ReduceOp, AllgatherOptions,
    # AVG on integers (HCCL: SUM, then a truncating division), PREMUL_SUM (scale, then SUM).
    pg = dist.distributed_c10d._get_default_group()
    m = torch.tensor([float(rank)], device=device)
    pg.allreduce(m, op=dist.ReduceOp.MAX).wait()
    i = torch.tensor([rank * 3 + 1, 5], device=device)
    dist.all_reduce(i, dist.ReduceOp.AVG)
    p = torch.tensor([float(rank + 1)], device=device)
    pg.allreduce([p], dist.ReduceOp.PREMUL_SUM(0.5)).wait()
    gathered_opts = [torch.empty(1, device=device) for _ in range(world)]
    pg.allgather([gathered_opts], [p], torch._C._distributed_c10d.AllgatherOptions()).wait()
    # HCCL's grouping on the group's npu backend object (ProcessGroupHCCL._group_start/_group_end): two async
    # all_reduces, and each rank receiving from its peer BEFORE sending to it (run one by one, both would wait)
    backend = pg._get_backend(device)
    a, b = torch.full((3,), rank + 1.0, device=device), torch.full((3,), 10.0 * (rank + 1), device=device)
    backend._group_start()
    works = [dist.all_reduce(a, async_op=True), dist.all_reduce(b, async_op=True)]
    got, mine = torch.zeros(4, device=device), torch.full((4,), float(rank), device=device)
    works += [dist.irecv(got, src=1 - rank), dist.isend(mine, dst=1 - rank)]
    backend._group_end()
    done = all(w.is_completed() for w in works) and all(w.wait() for w in works)
    api = {"max": m.cpu().tolist(), "int_avg": i.cpu().tolist(), "int_avg_dtype": str(i.dtype),
           "premul": p.cpu().tolist(), "allgather_opts": [g.item() for g in gathered_opts],
           "grouped": [a.cpu().tolist(), b.cpu().tolist(), got.cpu().tolist(), done]}

    result = {
        "rank": rank,
        "api": api,
        "fsdp": fsdp_vs_ddp(rank, world, local_rank, device),
        "world": world,
        "device": str(flat.device),
        "allreduce": t.cpu().tolist(),
        "losses": losses,
        "params_equal_across_ranks": all(torch.equal(gathered[0].cpu(), g.cpu()) for g in gathered),
        "backend": dist.get_backend(),
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    # gloo can abort at interpreter exit ("terminate called without an active exception") while a DDP
    # reducer still holds the group: drop the wrappers and collect them before destroying it.
    del ddp, opt
    gc.collect()
    dist.destroy_process_group()


def fsdp_vs_ddp(rank: int, world: int, local_rank: int, device: torch.device) -> dict:
    """The same model trained under FSDP2 (fully_shard on an npu device mesh over hccl) and under DDP."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    def build():
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(device)

    def run(model):
        opt = torch.optim.AdamW(model.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(200 + rank)
        losses = []
        for _ in range(3):
            x, y = torch.randn(5, 6, generator=gen).to(device), torch.randint(0, 3, (5,), generator=gen).to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses

    mesh = init_device_mesh("npu", (world,))
    sharded = build()
    for layer in (sharded[0], sharded[2], sharded):
        fully_shard(layer, mesh=mesh)
    fsdp_losses = run(sharded)
    weight = sharded[0].weight
    full = weight.full_tensor()
    return {"losses": fsdp_losses, "ddp_losses": run(DDP(build(), device_ids=[local_rank])),
            "is_dtensor": isinstance(weight, DTensor), "local_rows": weight.to_local().shape[0],
            "full_rows": full.shape[0], "full_device": str(full.device)}


if __name__ == "__main__":
    main(sys.argv[1])
