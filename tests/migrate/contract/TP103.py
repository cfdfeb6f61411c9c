"""`device="cuda"` arguments and `.to("cuda")`."""
import torch

x = torch.zeros(3, device="cuda")
y = torch.ones(3, device="cuda:1")
w = x.to("cuda")
v = x.to("cuda:0", non_blocking=True)
u = x.to(device="cuda", dtype=torch.float16)
layer = torch.nn.Linear(4, 2, device="cuda")
print(x.device, y.device, w.device, v.device, u.dtype, layer.weight.device)
