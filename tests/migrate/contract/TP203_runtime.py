"""TP203, a device type named at run time: `torch.autocast(device.type, ...)` and timm's
`functools.partial(torch.autocast, device_type=device.type, dtype=torch.float16)` (run and the fixed file apply the
same AMP policy: fp32 on a CPU without native fp16/bf16, fp16 as asked on the npu)."""
from functools import partial

import torch

device = torch.device("cuda")
model = torch.nn.Linear(8, 4).to(device)
x = torch.randn(2, 8, device=device)
with torch.autocast(device.type, dtype=torch.float16):
    a = model(x)
amp_autocast = partial(torch.autocast, device_type=device.type, dtype=torch.float16)
with amp_autocast():
    b = model(x)
print(a.dtype, b.dtype)
