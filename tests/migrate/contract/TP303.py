"""`nn.DataParallel(model)`: training through it, `.module`, a checkpoint of `model.state_dict()` and a
`module.`-keyed checkpoint loaded strictly."""
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
shipped = {f"module.{k}": v.clone() for k, v in net.state_dict().items()}   # a DataParallel checkpoint
model = nn.DataParallel(net).cuda()
model.load_state_dict(shipped)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(6, 4).cuda()).pow(2).mean()
loss.backward()
opt.step()
torch.save({"state_dict": model.state_dict(), "inner": model.module.state_dict()}, "checkpoint.th")
back = torch.load("checkpoint.th")
model.load_state_dict(back["state_dict"])
print(type(model).__name__, isinstance(model, nn.DataParallel), type(model.module).__name__, round(loss.item(), 5))
