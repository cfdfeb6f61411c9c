"""`torch.load` of a GPU-saved checkpoint without `map_location`, in CUDA code (run lands it on the device)."""
import torch

model = torch.nn.Linear(4, 3).cuda()
checkpoint = torch.load("gpu_ckpt.pt")
model.load_state_dict({"weight": checkpoint["weight"], "bias": checkpoint["bias"]})
torch.save(model.state_dict(), "resumed.pt")
mine = torch.load("resumed.pt")
print(checkpoint["weight"].device, mine["bias"].device, checkpoint["step"])
