"""The `cuda ... elif mps ... else cpu` chain."""
import torch

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
print(device, torch.zeros(1, device=device).device)
# run: this torch has no MPS build (False); the fix asks whether an accelerator is selected (the Mac's answer, True)
print("by-design:", torch.backends.mps.is_built())
