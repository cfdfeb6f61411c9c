"""`torch.amp.GradScaler()` without a device (it defaults to "cuda")."""
import torch

model = torch.nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler()
loss = model(torch.ones(2, 4).cuda()).pow(2).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
print(scaler.is_enabled(), scaler.get_scale())
