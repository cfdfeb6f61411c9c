"""Integer device indices: `.to(local_rank)`, `torch.device(i)`, `device=i`."""
import os

import torch

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
model = torch.nn.Linear(2, 2).to(local_rank)
dev = torch.device(local_rank)
x = torch.zeros(2, device=local_rank)


def literal(t):
    return t.to(1)


print(next(model.parameters()).device, dev, x.device, literal(x).device)
