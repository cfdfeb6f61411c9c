"""Re-creates the Ascend ModelZoo / NVIDIA ImageNet-example apex pattern: `from apex import amp`, `--amp`,
`amp.initialize(model, optimizer, opt_level="O1", loss_scale=128, combine_grad=True)` in `main_worker`,
`with amp.scale_loss(loss, optimizer) as scaled_loss:` in `train`, clipping over `amp.master_params`,
`amp.state_dict()` in the checkpoint, `.cuda(non_blocking=True)` batches."""
# corpus-args: --amp --epochs 1
import argparse
import os
import tempfile

import torch
import torch.nn as nn
from apex import amp

parser = argparse.ArgumentParser()
parser.add_argument("--amp", action="store_true", default=False)
parser.add_argument("--epochs", type=int, default=90)
parser.add_argument("--batch-size", type=int, default=16)


def main_worker(args):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 10))
    model = model.cuda()
    criterion = nn.CrossEntropyLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    if args.amp:
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=128, combine_grad=True)
    data = [(torch.randn(args.batch_size, 3, 16, 16), torch.randint(0, 10, (args.batch_size,))) for _ in range(4)]
    losses = []
    for epoch in range(args.epochs):
        losses += train(data, model, criterion, optimizer, args)
        state = {"epoch": epoch + 1, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict()}
        if args.amp:
            state["amp"] = amp.state_dict()
        torch.save(state, os.path.join(tempfile.gettempdir(), f"modelzoo_apex_{os.getpid()}.pth.tar"))
    return model, losses


def train(data, model, criterion, optimizer, args):
    model.train()
    losses = []
    for i, (images, target) in enumerate(data):
        images = images.cuda(non_blocking=True)
        target = target.cuda(non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        if args.amp:
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer) if args.amp else model.parameters(), 5.0)
        optimizer.step()
        losses.append(loss.item())
        print(f"step {i} loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    main_worker(parser.parse_args())
