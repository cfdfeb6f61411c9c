"""cuDNN settings: assignments and reads."""
import torch

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = False
torch.backends.cuda.matmul.allow_tf32 = False
enabled = torch.backends.cudnn.enabled
conv = torch.nn.Conv2d(1, 2, 3)
out = conv(torch.ones(1, 1, 5, 5))
torch.backends.cudnn.benchmark = False
print(enabled, out.shape, round(out.sum().item(), 4))
