"""`torch.autocast("cuda")` / `torch.amp.autocast(device_type="cuda")`."""
import torch

model = torch.nn.Linear(8, 4).cuda()
x = torch.randn(2, 8).cuda()
with torch.autocast("cuda"):
    a = model(x)
with torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16):
    b = model(x)
print(a.dtype, b.dtype)
