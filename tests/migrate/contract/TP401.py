"""`DataLoader(..., pin_memory=True)`."""
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.arange(8.0).reshape(4, 2), torch.arange(4))
loader = DataLoader(data, batch_size=2, pin_memory=True)
x, y = next(iter(loader))
x = x.cuda(non_blocking=True)
print(loader.pin_memory == torch.cuda.is_available(), x.device, y.tolist())
