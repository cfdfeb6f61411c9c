"""Where a JPEG worker's time goes: per-image CPU microseconds of each stage, measured one by one.

Stages (single core, ``time.process_time``, best of ``reps`` passes over the same ``n`` samples, so
a noisy neighbour inflates them less than wall time would):

* ``read`` -- copying the sample's bytes out of the shard's memory map (page cache);
* ``header`` -- size from the JPEG header;
* ``entropy`` -- Huffman decoding: a whole-image decode at 1/8 scale (DC only, almost no IDCT or
  colour work) with the region decoder;
* ``idct_upsample`` -- full-size decode to YCbCr (no colour conversion) minus ``entropy``;
* ``colour`` -- full-size RGB decode minus the YCbCr decode;
* ``full_decode_simplejpeg`` -- what the pipeline did before region decoding (reference);
* ``decode_as_used`` -- :func:`torchport.data.decode.decode_crop` with the real crop boxes
  (only the crop's rows/columns, DCT-scaled when the crop allows; with shards packed with restart
  markers, Huffman decoding covers only the restart segments the crop overlaps);
* ``decode_as_used_no_restarts`` -- the same, decoding from the top of the file as when the shards
  have no restart markers (the difference is what the markers save);
* ``crop_resize_flip`` -- antialiased resize of the decoded region into a float32 CHW batch slot,
  normalised in the same pass (what a CPU loader's worker does when ``/dev/shm`` has room);
* ``normalise`` -- the fallback consumer side (uint8 ring): uint8 -> normalised float32 into a
  preallocated buffer (native one-pass SSE2 with streaming stores, or numpy);
* ``ipc`` -- a DataLoader round trip per batch (labels + slot number only), divided by the batch size.

Example::

    prof = profile_jpeg("shards-jpeg", image_size=224)
    print(prof["stages_us"]["decode_as_used"])
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["profile_jpeg"]


def _best_us(fn, n: int, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return 1e6 * best / n


class _TinyBatches:
    """Dataset of ``(epoch, indices, slot)`` -> labels only: what crosses the pipe on the slot-ring path."""

    def __getitem__(self, item):
        import torch

        return torch.from_numpy(np.asarray(item[1], dtype=np.int64)), item[2]

    def __len__(self) -> int:
        return 1 << 30


def _ipc_us(batch_size: int, batches: int = 60) -> float:
    import torch

    sampler = [(0, np.arange(batch_size), k % 4) for k in range(batches)]
    dl = torch.utils.data.DataLoader(_TinyBatches(), batch_size=None, sampler=sampler, num_workers=1, collate_fn=lambda x: x)
    it = iter(dl)
    for _ in range(5):
        next(it)
    t = time.perf_counter()
    k = 5
    for _ in it:
        k += 1
    dt = time.perf_counter() - t
    return 1e6 * dt / max(1, (k - 5) * batch_size)


def profile_jpeg(shard_dir: str | Path, *, image_size: int = 224, n: int = 128, reps: int = 3, batch_size: int = 64) -> dict[str, Any]:
    """Per-stage CPU microseconds per image of the JPEG-shard worker path (see module docstring)."""
    import simplejpeg
    import torch

    from torchport.data import decode
    from torchport.data.augment import IMAGENET_MEAN, IMAGENET_STD, normalise_into, resize_into, rrc_params
    from torchport.data.format import ShardSet

    torch.set_num_threads(1)
    shards = ShardSet.open(shard_dir, verify="none")
    n = min(n, len(shards))
    idx = np.arange(n)
    H, W = shards.heights[idx].astype(np.int64), shards.widths[idx].astype(np.int64)
    p = rrc_params(H, W, seed=0, epoch=0, indices=idx)
    boxes = [(int(p.top[k]), int(p.left[k]), int(p.height[k]), int(p.width[k])) for k in range(n)]
    raws = [bytes(shards.raw(i)) for i in range(n)]
    out_hw = (image_size, image_size)
    st: dict[str, float] = {}
    st["read"] = _best_us(lambda: [bytes(shards.raw(i)) for i in range(n)], n, reps)
    st["header"] = _best_us(lambda: [decode.jpeg_size(r) for r in raws], n, reps)
    lib = decode._native()
    if lib is not None:
        def whole(denom, cs):
            for k in range(n):
                hw = (-(-int(H[k]) // denom), -(-int(W[k]) // denom))
                decode._native_region(lib, raws[k], denom, True, (0, 0) + hw, hw, colorspace=cs)

        e = _best_us(lambda: whole(8, 0), n, reps)
        ycc = _best_us(lambda: whole(1, 1), n, reps)
        rgb = _best_us(lambda: whole(1, 0), n, reps)
        st["entropy"] = e
        st["idct_upsample"] = max(0.0, ycc - e)
        st["colour"] = max(0.0, rgb - ycc)
    st["full_decode_simplejpeg"] = _best_us(
        lambda: [simplejpeg.decode_jpeg(r, colorspace="RGB", fastdct=True, fastupsample=True) for r in raws], n, reps)
    regions: list = []

    def as_used():
        regions.clear()
        for k in range(n):
            regions.append(decode.decode_crop(raws[k], (int(H[k]), int(W[k])), boxes[k], out_hw, fast=True)[:2])

    st["decode_as_used_no_restarts"] = _best_us(
        lambda: [decode.decode_crop(raws[k], (int(H[k]), int(W[k])), boxes[k], out_hw, restarts=False) for k in range(n)],
        n, reps)
    st["decode_as_used"] = _best_us(as_used, n, reps)
    slot = torch.empty((n, 3) + out_hw, dtype=torch.uint8)
    fslot = torch.empty((n, 3) + out_hw, dtype=torch.float32)
    scale = (1.0 / (255.0 * np.asarray(IMAGENET_STD, np.float32))).reshape(1, 3, 1, 1)
    bias = (-np.asarray(IMAGENET_MEAN, np.float32) / np.asarray(IMAGENET_STD, np.float32)).reshape(1, 3, 1, 1)
    sc, bi = np.ascontiguousarray(scale.ravel()), np.ascontiguousarray(bias.ravel())

    def resize():
        for k, (img, box) in enumerate(regions):
            resize_into(fslot[k], img, box, bool(p.flip[k]), norm=(sc, bi))

    st["crop_resize_flip"] = _best_us(resize, n, reps)
    for k, (img, box) in enumerate(regions):  # the uint8 ring's input for the fallback consumer stage below
        resize_into(slot[k], img, box, bool(p.flip[k]))
    buf = np.empty((n, 3) + out_hw, dtype=np.float32)
    xs = slot.numpy()

    def normalise():  # the loader's CPU path (uint8 ring): native one-pass kernel, else numpy
        normalise_into(buf, xs, sc, bi)

    st["normalise"] = _best_us(normalise, n, reps)
    st["ipc"] = _ipc_us(batch_size)
    worker = st["read"] + st["header"] + st["decode_as_used"] + st["crop_resize_flip"]
    return {
        "decoder": decode.native_status(),
        "samples": n,
        "image_size": image_size,
        "stages_us": {k: round(v, 1) for k, v in st.items()},
        "worker_us": round(worker, 1),
        "consumer_us": round(st["ipc"], 1),  # the workers normalise (float32 slot ring)
        "mean_crop_area_fraction": round(float(np.mean(p.height * p.width / (H * W))), 3),
    }
