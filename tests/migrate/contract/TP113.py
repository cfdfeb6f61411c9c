"""`torch.cuda.synchronize()` with and without a device."""
import time

import torch

x = torch.randn(64, 64).cuda()


def timed():
    start = time.perf_counter()
    y = x @ x
    torch.cuda.synchronize()
    torch.cuda.synchronize(x.device)
    return y, time.perf_counter() - start >= 0


y, elapsed_ok = timed()
print(y.device, elapsed_ok)
