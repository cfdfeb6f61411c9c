"""The pipeline feeds a real training loop on every portable device (cpu, emulated npu, cuda if present)."""

from __future__ import annotations

import torch

from torchport.data.loader import make_loader


def test_pipeline_trains_a_small_model(portable_device, shards):
    target = portable_device
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 3),
    ).to(target.device)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    loader = make_loader(shards["predecoded"], batch_size=12, image_size=32, seed=0, num_workers=0, target=target)
    first = last = None
    for epoch in range(6):
        loader.set_epoch(epoch)
        for images, labels in loader:
            assert images.device.type == target.device.type and images.dtype == torch.float32
            assert labels.device.type == target.device.type
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            first = loss.item() if first is None else first
            last = loss.item()
    assert last < first  # it learns from what the pipeline delivers


def test_batches_identical_across_devices(portable_device, shards):
    """Cross-platform parity: the same (seed, epoch) gives the same normalised batch on every device."""
    from torchport.runtime.device import select_device

    kw = dict(batch_size=8, image_size=32, seed=7, num_workers=0, return_indices=True)
    ref = make_loader(shards["jpeg"], target=select_device("cpu"), **kw)
    ref.set_epoch(2)
    xr, yr, ir = next(iter(ref))
    xr = xr.clone()
    dev = make_loader(shards["jpeg"], target=portable_device, **kw)
    dev.set_epoch(2)
    xd, yd, idd = next(iter(dev))
    assert torch.equal(ir, idd)
    torch.testing.assert_close(xd.cpu(), xr, rtol=0, atol=1e-5)
