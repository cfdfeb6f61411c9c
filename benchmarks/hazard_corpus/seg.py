"""A tiny segmentation + box-detection head trained the way public detection/segmentation scripts often are
(CUDA-style; ours, for the hazard report): multi-scale training (a random input size per step), per-step IoU with
`torch.unique` / boolean indexing, NMS on predicted boxes, metrics with `.item()` and `.cpu().numpy()`."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
args = p.parse_args()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
C = 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.seg = nn.Conv2d(32, C, 1)
        self.box = nn.Conv2d(32, 5, 1)   # 4 box offsets + score

    def forward(self, x):
        f = self.enc(x)
        return F.interpolate(self.seg(f), size=x.shape[-2:], mode="bilinear", align_corners=False), self.box(f)


model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
ious = []
for step in range(args.steps):
    size = int(np.random.choice([48, 64, 80]))                        # multi-scale training
    img = torch.randn(4, 3, size, size, device=device)
    target = torch.randint(0, C, (4, size, size), device=device)
    seg, box = model(img)
    loss = F.cross_entropy(seg, target) + box[:, 4].sigmoid().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    pred = seg.argmax(1)
    inter = [((pred == c) & (target == c)).sum() for c in torch.unique(target)]
    union = [((pred == c) | (target == c)).sum() for c in torch.unique(target)]
    ious.append(np.mean([(i / u).item() for i, u in zip(inter, union)]))
    scores = box[0, 4].flatten().sigmoid()
    keep = scores > 0.5
    cx = torch.nonzero(keep)[:, 0].float()
    boxes = torch.stack([cx, cx, cx + 4, cx + 4], 1)
    kept = torchvision.ops.nms(boxes, scores[keep], 0.5)
    weights = torch.from_numpy(np.array([0.2, 0.3, 0.5])).to(device)   # float64 class weights
    weighted = (weights * torch.bincount(target.flatten(), minlength=C).to(device)).sum()
    hist = pred.cpu().numpy()
print(f"seg: {len(ious)} steps, mIoU {ious[-1]:.3f}")
