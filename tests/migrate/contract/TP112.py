"""Selecting a device: `torch.cuda.set_device(i)`, with a device object, and `with torch.cuda.device(i):`."""
import torch

torch.cuda.set_device(0)
a = torch.zeros(2).cuda()
with torch.cuda.device(1):
    b = torch.zeros(2).cuda()
    inner = torch.cuda.current_device()
c = torch.zeros(2).cuda()
torch.cuda.set_device(torch.device("cuda:1"))
d = torch.zeros(2).cuda()
torch.cuda.set_device(0)
print(a.device, b.device, inner, c.device, d.device)
