"""`tensor.is_cuda`."""
import torch

x = torch.ones(2).cuda()
if x.is_cuda:
    moved = "device"
else:
    moved = "host"
on_gpu = not x.is_cuda
same = x.is_cuda == torch.ones(1).is_cuda
print(moved, on_gpu, same)
