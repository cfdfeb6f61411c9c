"""`torch.load(..., map_location="cuda:0")` of a CPU-saved and of a GPU-saved checkpoint."""
import torch

torch.save(torch.nn.Linear(2, 2).state_dict(), "cpu_ckpt.pt")
mine = torch.load("cpu_ckpt.pt", map_location="cuda:0")
gpu = torch.load("gpu_ckpt.pt", map_location=torch.device("cuda"))
print(mine["weight"].device, gpu["weight"].device, gpu["step"])
