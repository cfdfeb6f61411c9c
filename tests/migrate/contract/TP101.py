"""`.cuda()` on modules and tensors, with an index and keywords."""
import torch
import torch.nn as nn

model = nn.Linear(4, 3).cuda()
x = torch.randn(2, 4).cuda(non_blocking=True)
y = x.cuda(0)
z = x.cuda(device=1, non_blocking=True)
batch = [t.cuda() for t in (x, y)]
out = model(batch[0])
print(out.device, y.device, z.device, out.sum().item())
