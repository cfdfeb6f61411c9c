"""`tensor.pin_memory()` (TP902, off by default)."""
import torch

x = torch.arange(6.0).reshape(2, 3)
pinned = x.pin_memory()
print(pinned.is_pinned() == torch.cuda.is_available(), pinned.sum().item())
