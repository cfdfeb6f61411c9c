"""Unused `# noqa: TP...` comments (TP801): the fix removes them; a used one stays (on a line whose CUDA
reference is harmless: a noqa'd line keeps what it does under plain torch, the user's choice)."""
import os

import torch

x = torch.ones(2)  # noqa: TP101
y = torch.zeros(2) + 1  # keep this note  # noqa: TP103,TP104
visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")  # noqa: TP130
print(x.sum().item(), y.tolist(), visible != "never")
