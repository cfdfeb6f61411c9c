"""Re-creates the single-process DataParallel pattern (pytorch/examples imagenet's non-distributed branch,
many classification repos): `model = nn.DataParallel(model).cuda()` when GPUs are present, training through
the wrapper, `model.module.state_dict()` in the checkpoint."""
# corpus-args: --epochs 1
import argparse
import os
import tempfile

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=90)
parser.add_argument("--batch-size", type=int, default=16)
args = parser.parse_args()

model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 10))
if torch.cuda.is_available():
    model = nn.DataParallel(model).cuda()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
data = [(torch.randn(args.batch_size, 3, 16, 16), torch.randint(0, 10, (args.batch_size,))) for _ in range(2)]
for epoch in range(args.epochs):
    for images, target in data:
        if torch.cuda.is_available():
            images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save({"state_dict": model.module.state_dict() if torch.cuda.is_available() else model.state_dict()},
               os.path.join(tempfile.gettempdir(), f"data_parallel_single_{os.getpid()}.pth"))
