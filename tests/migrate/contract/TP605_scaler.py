"""torch_npu's GradScaler and its state in a checkpoint. The fix (`torch.amp.GradScaler(torchport.current().type)`)
is unsafe: torch_npu's scaler adds a `dynamic` key to its state_dict (the harness expects that one difference)."""
import torch

model = torch.nn.Linear(4, 1).npu()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.npu.amp.GradScaler()
with torch.npu.amp.autocast():
    loss = model(torch.ones(2, 4).npu()).pow(2).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
torch.save({"scaler": scaler.state_dict()}, "amp.pt")
print(scaler.get_scale(), round(loss.item(), 4))
