"""`"cuda"` strings in value positions: assignments, defaults, comparisons, returns, dict values."""
import argparse

import torch

device = "cuda"
DEVICE: str = "cuda:0"


def pick(dev="cuda"):
    if dev == "cuda":
        return "cuda"
    return dev


parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")
args = parser.parse_args([])
config = {"device": "cuda"}
t = torch.randn(2, device=device) + torch.randn(2, device=DEVICE)
s = torch.zeros(2, device=args.device).to(config["device"]).to(pick())
print(t.device, s.device)
# run keeps the literal "cuda" here while the tensor is on the target: the fix compares with the selected type
print("by-design:", t.device.type == "cuda")
