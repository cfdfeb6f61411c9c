"""`CUDA_VISIBLE_DEVICES` read and set from Python."""
import os

import torch

visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset") != "never"
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
x = torch.ones(2).cuda()
print(visible, x.device)
