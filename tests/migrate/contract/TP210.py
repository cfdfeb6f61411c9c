"""apex AMP: `amp.initialize`, `amp.scale_loss` (the apex stand-in serves it on the emulated npu only)."""
import torch
from apex import amp

model = torch.nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = amp.initialize(model, opt, opt_level="O1")


def step():
    loss = model(torch.ones(2, 4).cuda()).pow(2).mean()
    with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()
    opt.step()
    return loss


print(round(step().item(), 3))
