"""`torch.device("cuda")` in its spellings."""
import torch

rank = 1
a = torch.device("cuda")
b = torch.device("cuda:0")
c = torch.device(f"cuda:{rank}")
d = torch.device("cuda", 0)
e = torch.device(type="cuda")
t = torch.ones(2, device=a) + torch.ones(2, device=b)
print(a, b, c, d, e, t.device)
