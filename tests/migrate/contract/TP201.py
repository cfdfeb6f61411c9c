"""`torch.cuda.amp.autocast()` around a forward."""
import torch
from torch.cuda.amp import autocast

model = torch.nn.Linear(8, 4).cuda()
x = torch.randn(2, 8).cuda()
with torch.cuda.amp.autocast():
    out = model(x)
with autocast(dtype=torch.bfloat16):
    out2 = model(x)
print(out.dtype, out2.dtype)
