"""CUDA random generators: seeding, state save and restore, the initial seed."""
import torch

torch.manual_seed(0)
torch.cuda.manual_seed(1)
torch.cuda.manual_seed_all(2)
state = torch.cuda.get_rng_state()
first = torch.rand(3, device="cuda")
torch.cuda.set_rng_state(state)
again = torch.rand(3, device="cuda")
states = torch.cuda.get_rng_state_all()
torch.cuda.set_rng_state_all(states)
seed0 = torch.cuda.initial_seed()
cpu_draw = torch.rand(2)
print(torch.equal(first, again), len(states), seed0, cpu_draw)
