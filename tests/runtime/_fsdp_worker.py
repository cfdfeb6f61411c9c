"""One rank of a small FSDP/DDP run (forked by the tests with torchrun's variables set, launched by torchrun, or
alone for world size 1).

The global batch of every step is a pure function of the step (12 samples: divisible by 1, 2, 3 and 4
ranks); rank r trains on its contiguous slice, so the mean gradient over ranks -- and the loss trajectory --
do not depend on the world size. Usage::

    torchrun --nproc-per-node W _fsdp_worker.py --strategy fsdp --from-step 0 --to-step 8 [--save-at 4 --ckpt DIR]
        [--resume DIR] --out result.json
"""

from __future__ import annotations

import argparse
import json

import torch

import torchport
from torchport.runtime import distributed as dist
from torchport.runtime.dcp import DcpCheckpointManager
from torchport.runtime.fsdp import full_state_dict, shard_model, state_bytes

GLOBAL_BATCH = 12


def build(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4)).to(device)


def batch(step: int, rank: int, world: int, device):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 16, generator=g)
    y = torch.randint(0, 4, (GLOBAL_BATCH,), generator=g)
    per = GLOBAL_BATCH // world
    return x[rank * per:(rank + 1) * per].to(device), y[rank * per:(rank + 1) * per].to(device)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", default="fsdp", choices=("fsdp", "ddp"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--from-step", type=int, default=0)
    ap.add_argument("--to-step", type=int, default=8)
    ap.add_argument("--save-at", type=int, default=None)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    target = torchport.init_distributed(a.device)
    rank, world = dist.rank(), dist.world_size()
    model = build(target.device)
    model = shard_model(model, target) if a.strategy == "fsdp" else dist.wrap_ddp(model, target)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    if a.resume:
        progress = DcpCheckpointManager(a.ckpt or a.resume).load(a.resume, model=model, optimizer=optimizer)
        assert progress["step"] == a.from_step, progress
    manager = DcpCheckpointManager(a.ckpt) if a.ckpt else None
    losses = {}
    for step in range(a.from_step, a.to_step):
        x, y = batch(step, rank, world, target.device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses[step] = dist.all_reduce_mean(loss.item(), target)
        if a.save_at is not None and step + 1 == a.save_at:
            manager.save(step=step + 1, model=model, optimizer=optimizer, extra={"progress": {"step": step + 1}})
    full = full_state_dict(model)
    result = {"rank": rank, "world": world, "losses": losses, "bytes": state_bytes(model, optimizer),
              "checksum": float(sum(v.double().sum() for v in full.values())),
              "device": str(next(model.parameters()).device)}
    with open(f"{a.out}.{rank}", "w") as fh:
        json.dump(result, fh)
    dist.barrier()
    dist.destroy()


def forked(rank: int, world: int, port: int, argv: list[str]) -> None:
    """One rank started by the tests' forkserver: torchrun's variables, then :func:`main`."""
    import os

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.pop("TORCHELASTIC_RESTART_COUNT", None)
    torch.set_num_threads(1)
    main(argv)


if __name__ == "__main__":
    main()
