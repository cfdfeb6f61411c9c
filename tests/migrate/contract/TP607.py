"""`ASCEND_RT_VISIBLE_DEVICES` read and set from Python."""
import os

import torch

seen = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "all")
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0"
x = torch.ones(2).to("npu")
print(seen, x.device)
