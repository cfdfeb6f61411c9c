"""Issue 24: Ctrl-C stops a run with one line -- DataLoader workers (both loaders) ignore SIGINT and leave
the stop to the main process, instead of each printing a KeyboardInterrupt traceback."""

from __future__ import annotations

import signal

import numpy as np
import torch

from torchport.data.loader import make_loader
from torchport.runtime.device import select_device
from torchport.runtime.loader import loader_kwargs


class _Handlers(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.tensor(int(signal.getsignal(signal.SIGINT) is signal.SIG_IGN))


def test_workers_of_loader_kwargs_ignore_sigint():
    kw = loader_kwargs(select_device("cpu"), num_workers=2, seed=0)
    kw["persistent_workers"] = False
    got = torch.cat(list(torch.utils.data.DataLoader(_Handlers(), batch_size=2, **kw)))
    assert got.tolist() == [1, 1, 1, 1]


def test_fast_loader_workers_ignore_sigint(shards, monkeypatch):
    from torchport.data import dataset

    seen = []
    real = dataset.BatchDataset.__getitem__

    def spy(self, item):
        batch = real(self, item)
        batch.labels = torch.full_like(torch.as_tensor(batch.labels),
                                       int(signal.getsignal(signal.SIGINT) is signal.SIG_IGN))
        return batch

    monkeypatch.setattr(dataset.BatchDataset, "__getitem__", spy)
    loader = make_loader(shards["jpeg"], batch_size=4, num_workers=2, target=select_device("cpu"), image_size=32)
    try:
        for _, labels in loader:
            seen.extend(np.asarray(labels).tolist())
    finally:
        loader.close()
    assert seen and set(seen) == {1}
