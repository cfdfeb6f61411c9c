"""The Apple MPS API in an Apple-only script: memory counters, synchronize, seeding, the RNG state."""
import torch

device = torch.device("mps")
x = torch.randn(16, 16, device=device)
torch.mps.manual_seed(1)
torch.mps.synchronize()
current = torch.mps.current_allocated_memory()
driver = torch.mps.driver_allocated_memory()
state = torch.mps.get_rng_state()
torch.mps.set_rng_state(state)
torch.mps.empty_cache()
print(x.device, current >= 0, driver >= 0, state.dtype)
