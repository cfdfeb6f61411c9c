"""`torch.load` without `map_location` in a file that places nothing itself (TP901, off by default)."""
import torch

state = torch.load("gpu_ckpt.pt")
print(state["weight"].device, sorted(state))
