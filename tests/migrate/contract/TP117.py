"""NVTX ranges and marks around work."""
import torch

x = torch.randn(8, 8)
with torch.cuda.nvtx.range("forward"):
    y = x @ x
torch.cuda.nvtx.range_push("backward")
z = y.sum()
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.mark("done")
print(z.item())
