"""The Ascend device API: set_device, synchronize, memory counters and summary, seeding, autocast."""
import torch

torch.npu.set_device(0)
_base = torch.npu.memory_allocated()   # the process's allocations so far
model = torch.nn.Linear(4, 2).npu()
x = torch.randn(3, 4).npu()
torch.npu.manual_seed(3)
with torch.npu.amp.autocast():
    out = model(x)
torch.npu.synchronize()
allocated = torch.npu.memory_allocated() - _base
n = torch.npu.device_count()
summary_type = type(torch.npu.memory_summary()).__name__
print(out.dtype, allocated >= 0, n, summary_type, torch.npu.is_available())
