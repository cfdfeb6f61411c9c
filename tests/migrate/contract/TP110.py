"""`torch.cuda.is_available()` deciding where to train."""
import torch

use_gpu = torch.cuda.is_available()
x = torch.ones(3)
if use_gpu:
    x = x.cuda()
print(use_gpu, x.device)
