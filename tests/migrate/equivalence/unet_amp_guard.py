"""Re-creates the milesial/Pytorch-UNet train.py pattern: `--amp`, a `'cuda' if is_available` device, the
`torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp)` guard and `GradScaler`."""
# corpus-args: --amp
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--amp", action="store_true", default=False)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))
model.to(device=device, memory_format=torch.channels_last)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-5, weight_decay=1e-8, momentum=0.999, foreach=True)
grad_scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
criterion = nn.CrossEntropyLoss()
for step in range(4):
    images = torch.rand(2, 3, 16, 16).to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
    true_masks = torch.randint(0, 2, (2, 16, 16)).to(device=device, dtype=torch.long)
    with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=args.amp):
        masks_pred = model(images)
        loss = criterion(masks_pred, true_masks) + F.mse_loss(masks_pred.float().softmax(1)[:, 1], true_masks.float())
    optimizer.zero_grad(set_to_none=True)
    grad_scaler.scale(loss).backward()
    grad_scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    grad_scaler.step(optimizer)
    grad_scaler.update()
    print("loss", loss.item())
