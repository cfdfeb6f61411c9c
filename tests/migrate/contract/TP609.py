"""A `--mps` / `--npu` flag."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--mps", action="store_true", help="use Apple's GPU")
parser.add_argument("--npu", action="store_true")
args = parser.parse_args([])
device = torch.device("mps" if args.mps else "cpu")
print(args.mps, args.npu, device)
