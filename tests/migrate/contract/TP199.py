"""Other `torch.cuda` names: IPC clean-up, build flags, the out-of-memory exception class."""
import torch

torch.cuda.ipc_collect()
flags = torch.cuda.get_gencode_flags()
try:
    x = torch.ones(2).cuda()
except torch.cuda.OutOfMemoryError:
    x = None
print(type(flags).__name__, x.device)
