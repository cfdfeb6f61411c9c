"""2-process DDP worker for test_emu_distributed.py: plain Ascend-style code, no torchport import.

Run by torchrun with TORCHPORT_EMULATE=npu:2; writes one JSON file per rank into argv[1].
"""

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
    result = {
        "rank": rank,
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
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
