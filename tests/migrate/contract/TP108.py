"""A `--cuda` flag; the device built from it."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true", help="use cuda")
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args(["--cuda"])
use_cuda = args.cuda and not args.no_cuda
device = torch.device("cuda" if use_cuda else "cpu")
print(device, torch.zeros(1, device=device).device)
