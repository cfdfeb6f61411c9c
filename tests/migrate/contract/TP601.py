"""`.npu()` on modules and tensors (an Ascend script)."""
import torch

model = torch.nn.Linear(3, 2).npu()
x = torch.ones(2, 3).npu()
y = x.npu(0)
print(model(x).device, y.device)
