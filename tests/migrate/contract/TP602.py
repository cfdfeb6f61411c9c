"""`"npu"` / `"npu:0"` device strings and `torch.device("npu")`."""
import torch

device = torch.device("npu:0")
x = torch.zeros(2, device="npu")
name = "npu"
y = torch.ones(2).to(device)
print(device, x.device, name, y.device)
