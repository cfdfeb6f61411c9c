"""`DistributedDataParallel(model, device_ids=[local_rank], output_device=local_rank)` in a one-process group."""
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ.get("LOCAL_RANK", "0"))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).cuda()
model = DDP(model, device_ids=[local_rank], output_device=local_rank)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.ones(3, 4).cuda()).sum()
loss.backward()
opt.step()
keys = list(model.state_dict())
dist.destroy_process_group()
print(round(loss.item(), 5), keys)
