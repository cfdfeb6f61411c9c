"""Device queries: counts, the current index, names, properties, capability, bf16 and torch's build queries."""
import torch

n = torch.cuda.device_count()
i = torch.cuda.current_device()
bf16 = torch.cuda.is_bf16_supported()
name = torch.cuda.get_device_name(0)
cap = torch.cuda.get_device_capability()
total = torch.cuda.get_device_properties(0).total_memory
arch = torch.cuda.get_arch_list()
ready = torch.cuda.is_initialized()
print(n, i, bf16, type(name).__name__, len(cap), total > 0, type(arch).__name__, ready)
