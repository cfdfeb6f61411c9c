"""Re-creates two patterns: a script that already dispatches on the device type (`== 'cuda'` ... `elif ==
'npu'`, as Ascend-aware forks of pytorch/examples do) and a resume from a checkpoint loaded with a CUDA
`map_location`."""
import os
import tempfile

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(6, 3).to(device)
ckpt = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
torch.save(model.state_dict(), ckpt)
model.load_state_dict(torch.load(ckpt, map_location="cuda:0" if torch.cuda.is_available() else "cpu"))
if device.type == "cuda":
    lr = 0.1
elif device.type == "npu":
    lr = 0.1
else:
    lr = 0.1
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
x, y = torch.randn(16, 6).to(device), torch.randn(16, 3).to(device)
for step in range(4):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
