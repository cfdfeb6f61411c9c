"""`"cuda" if torch.cuda.is_available() else "cpu"` and its `torch.device` forms."""
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
name = "cuda" if torch.cuda.is_available() else "cpu"
other = "cpu" if not torch.cuda.is_available() else "cuda:0"
model = torch.nn.Linear(3, 1).to(device)
print(device, name, other, model(torch.ones(1, 3, device=name)).item())
