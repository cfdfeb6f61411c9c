"""Run by test_distributed under torchrun: a DDP step written only with the runtime API."""

import gc
import json
import os
import sys

import torch

import torchport

target = torchport.init_distributed()
torch.manual_seed(0)  # same init on every rank
model = torchport.wrap_ddp(torch.nn.Linear(4, 2).to(target.device))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
r = torchport.rank()
x = torch.full((3, 4), float(r + 1), device=target.device)  # different data per rank
model(x).sum().backward()
opt.step()
torchport.barrier(timeout=60)
mean = torchport.all_reduce_mean(float(r))
import torch.distributed as dist

out = {
    "rank": r,
    "world": torchport.world_size(),
    "backend": dist.get_backend(),
    "weight": model.module.weight.detach().cpu().flatten().tolist(),
    "mean_rank": mean,
    "main": torchport.is_main_process(),
}
with open(os.path.join(sys.argv[1], f"rank{r}.json"), "w") as fh:
    json.dump(out, fh)
dist.barrier()  # no rank tears gloo down while its peer still talks to it
# Drop the DDP wrapper (its reducer holds the process group) before destroying the group: otherwise the
# group's C++ threads are torn down during interpreter finalization, where gloo can abort the process
# ("terminate called without an active exception") after all the work is done.
del model, opt
gc.collect()
torchport.runtime.distributed.destroy()
