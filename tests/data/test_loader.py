"""The loader: determinism across worker counts and ranks, resume, normalisation, corrupt samples."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
import torch

from torchport.data.dataset import AugmentConfig, ShardDataset
from torchport.data.errors import CorruptSampleError
from torchport.data.loader import CorruptSampleWarning, make_loader
from torchport.data.sampler import EpochBatchSampler
from torchport.runtime.device import select_device


@pytest.fixture
def cpu():
    return select_device("cpu")


def _collect(loader, epoch=1):
    loader.set_epoch(epoch)
    return [(x.clone(), y.clone(), i.clone()) for x, y, i in loader]


@pytest.mark.parametrize("mode", ["jpeg", "predecoded"])
def test_same_batches_with_0_and_2_workers(shards, cpu, mode):
    kw = dict(batch_size=8, train=True, image_size=32, seed=5, target=cpu, return_indices=True)
    a = _collect(make_loader(shards[mode], num_workers=0, **kw))
    b = _collect(make_loader(shards[mode], num_workers=2, **kw))
    assert len(a) == len(b) == 36 // 8  # drop_last for training
    for (xa, ya, ia), (xb, yb, ib) in zip(a, b):
        assert torch.equal(ia, ib) and torch.equal(ya, yb)
        assert torch.equal(xa, xb)  # bit-identical pixels


def test_epochs_shuffle_differently_and_val_is_ordered(shards, cpu):
    L = make_loader(shards["jpeg"], batch_size=8, num_workers=0, image_size=32, seed=5, target=cpu, return_indices=True)
    e1 = torch.cat([i for _, _, i in _collect(L, 1)])
    e2 = torch.cat([i for _, _, i in _collect(L, 2)])
    assert not torch.equal(e1, e2)
    V = make_loader(shards["jpeg"], train=False, batch_size=8, num_workers=0, image_size=32, target=cpu, return_indices=True)
    idx = torch.cat([i for _, _, i in _collect(V, 0)])
    assert idx.tolist() == list(range(36))  # every sample once, in order, last batch kept


def test_rank_split_is_disjoint_and_matches_single_process_augmentation(shards, cpu):
    kw = dict(batch_size=6, image_size=32, seed=2, num_workers=0, target=cpu, return_indices=True)
    full = {int(i): x for xb, _, ib in _collect(make_loader(shards["predecoded"], **kw)) for x, i in zip(xb, ib)}
    seen = {}
    for rank in (0, 1):
        L = make_loader(shards["predecoded"], rank=rank, world_size=2, **kw)
        for xb, _, ib in _collect(L):
            for x, i in zip(xb, ib):
                assert int(i) not in seen
                seen[int(i)] = x
    assert len(seen) == 36
    for i in set(seen) & set(full):  # a sample's augmentation does not depend on the rank layout
        assert torch.equal(seen[i], full[i])


def test_resume_from_state_dict(shards, cpu):
    kw = dict(batch_size=4, image_size=32, seed=9, num_workers=0, target=cpu, return_indices=True)
    ref = _collect(make_loader(shards["jpeg"], **kw), epoch=3)
    L = make_loader(shards["jpeg"], **kw)
    L.set_epoch(3)
    it = iter(L)
    for _ in range(3):
        next(it)
    state = L.state_dict()
    assert state["epoch"] == 3 and state["batches_done"] == 3
    R = make_loader(shards["jpeg"], **kw)
    R.load_state_dict(state)
    rest = [(x.clone(), y, i) for x, y, i in R]
    assert len(rest) == len(ref) - 3
    for (xa, _, ia), (xb, _, ib) in zip(ref[3:], rest):
        assert torch.equal(ia, ib) and torch.equal(xa, xb)
    with pytest.raises(ValueError, match="batch_size"):
        make_loader(shards["jpeg"], **{**kw, "batch_size": 5}).load_state_dict(state)


def test_normalisation_matches_manual(shards, cpu):
    L = make_loader(shards["predecoded"], batch_size=8, image_size=32, seed=1, num_workers=0, target=cpu, return_indices=True)
    L.set_epoch(0)
    x, y, idx = next(iter(L))
    raw = L.dataset[(0, idx.numpy())].images.float() / 255
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    assert x.dtype == torch.float32 and x.shape == (8, 3, 32, 32)
    torch.testing.assert_close(x, (raw - mean) / std, rtol=1e-5, atol=1e-5)


def test_cpu_buffers_are_reused_and_can_be_disabled(shards, cpu):
    L = make_loader(shards["predecoded"], batch_size=8, image_size=32, num_workers=0, target=cpu)
    ptrs = [x.data_ptr() for x, _ in L]
    assert len(set(ptrs)) == 2  # two preallocated buffers, alternating
    L2 = make_loader(shards["predecoded"], batch_size=8, image_size=32, num_workers=0, target=cpu, reuse_buffers=False)
    kept = [x for x, _ in L2]
    assert len({x.data_ptr() for x in kept}) == len(kept)


def test_folder_fast_path_equals_jpeg_shards(shards, train_folder, cpu):
    kw = dict(batch_size=8, image_size=32, seed=4, num_workers=0, target=cpu, return_indices=True)
    a = _collect(make_loader(shards["jpeg"], **kw))
    b = _collect(make_loader(train_folder, **kw))
    for (xa, _, ia), (xb, _, ib) in zip(a, b):
        assert torch.equal(ia, ib) and torch.equal(xa, xb)


def test_dct_scaled_decode_is_used_for_small_outputs(shards):
    from torchport.data import decode

    calls = []
    orig = decode.decode_crop

    def spy(*a, **k):
        img, box, f = orig(*a, **k)
        calls.append(f)
        return img, box, f

    ds = ShardDataset(shards["jpeg"], size=8, train=False)
    import torchport.data.dataset as dsmod

    old = dsmod.decode_crop
    dsmod.decode_crop = spy
    try:
        b = ds[(0, np.arange(4))]
    finally:
        dsmod.decode_crop = old
    assert b.images.shape == (4, 3, 8, 8)
    assert calls and all(f < 1.0 for f in calls)  # 35px centre crop -> 8px: decoded at 1/4


def test_device_augment_path_runs_and_crops(shards, cpu):
    L = make_loader(shards["predecoded"], batch_size=8, image_size=32, seed=3, num_workers=0, target=cpu, augment="device")
    assert L.dataset.aug.where == "device"
    L.set_epoch(0)
    x, y = next(iter(L))
    assert x.shape == (8, 3, 32, 32) and torch.isfinite(x).all()
    # close to the CPU path (different resampling kernels, same crops)
    C = make_loader(shards["predecoded"], batch_size=8, image_size=32, seed=3, num_workers=0, target=cpu, augment="cpu")
    C.set_epoch(0)
    xc, yc = next(iter(C))
    assert torch.equal(y, yc)
    assert (x - xc).abs().mean() < 0.25


@pytest.fixture
def corrupt_folder(tmp_path, train_folder):
    src = tmp_path / "bad"
    shutil.copytree(train_folder, src)
    victim = sorted((src / "ring").iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:200])  # truncated JPEG
    return src, victim


def test_corrupt_sample_policy_error_names_the_file(corrupt_folder, cpu):
    src, victim = corrupt_folder
    L = make_loader(src, batch_size=36, train=False, image_size=32, num_workers=0, target=cpu)
    with pytest.raises(CorruptSampleError, match=victim.name):
        next(iter(L))


def test_corrupt_sample_policy_skip_counts_and_warns(corrupt_folder, cpu):
    src, victim = corrupt_folder
    L = make_loader(src, batch_size=36, train=False, image_size=32, num_workers=2, target=cpu, corrupt="skip")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        batches = list(L)
    assert sum(x.shape[0] for x, _ in batches) == 35
    assert len(L.stats.skipped) == 1 and victim.name in L.stats.skipped[0][1]
    assert any(issubclass(m.category, CorruptSampleWarning) for m in w)


def test_sampler_padding_without_drop_last():
    s = EpochBatchSampler(10, 3, world_size=3, rank=2, shuffle=False, drop_last=False)
    got = np.concatenate([b for _, b in s])
    assert len(got) == 4 and s.batches_per_epoch() == 2
    assert got.tolist() == [2, 5, 8, 1]  # wrapped around to pad 10 -> 12


def test_bad_options_are_errors(shards, cpu):
    with pytest.raises(ValueError, match="augment"):
        make_loader(shards["jpeg"], batch_size=4, target=cpu, augment="gpu")
    with pytest.raises(TypeError):
        make_loader(shards["jpeg"], batch_size=4, target=cpu, no_such_option=1)
    with pytest.raises(ValueError, match="corrupt"):
        AugmentConfig(corrupt="ignore")
    with pytest.raises(Exception, match="does not exist"):
        make_loader("/nonexistent/dir", batch_size=4, target=cpu)


def test_split_directory_of_shards(tmp_path, synth_root, cpu):
    from torchport.data.pack import pack_splits

    pack_splits(synth_root, tmp_path / "sh", mode="jpeg", workers=1)
    tr = make_loader(tmp_path / "sh", batch_size=4, image_size=32, num_workers=0, target=cpu)
    va = make_loader(tmp_path / "sh", batch_size=4, train=False, image_size=32, num_workers=0, target=cpu)
    assert tr.dataset.mode == "jpeg" and len(tr.dataset) == 36 and len(va.dataset) == 12
    assert tr.dataset.classes == ["circle", "ring", "square"]


@pytest.mark.parametrize("persistent", [True, False])
def test_shared_slot_ring_wraps_around_without_corruption(shards, cpu, persistent):
    """18 batches per epoch through a 6-slot ring, 2 epochs, an abandoned iterator in between."""
    kw = dict(batch_size=2, image_size=24, seed=11, target=cpu, return_indices=True)
    ref = make_loader(shards["predecoded"], num_workers=0, **kw)
    L = make_loader(shards["predecoded"], num_workers=2, persistent_workers=persistent, **kw)
    L.set_epoch(0)
    it = iter(L)
    next(it)  # abandoned mid-epoch: its prefetched batches must not leak into the next pass
    for epoch in (0, 1):
        a, b = _collect(ref, epoch), _collect(L, epoch)
        assert len(a) == len(b) == 18
        assert L._slots is not None and L._slots.shape[0] == 6
        for (xa, _, ia), (xb, _, ib) in zip(a, b):
            assert torch.equal(ia, ib) and torch.equal(xa, xb)


def test_corrupt_jpeg_inside_a_shard_names_shard_and_offset(tmp_path, shards, cpu):
    from torchport.data.format import ShardSet

    dst = tmp_path / "j"
    shutil.copytree(shards["jpeg"], dst)
    s = ShardSet.open(dst)
    off, n = int(s.index["offset"][5]), int(s.index["nbytes"][5])
    with open(dst / "shard-00000.tps", "r+b") as f:  # scramble the entropy-coded data of sample 5
        f.seek(off + n // 2)
        f.write(np.random.default_rng(0).integers(0, 256, n // 2 - 2, dtype=np.uint8).tobytes())
    L = make_loader(dst, batch_size=36, train=False, image_size=32, num_workers=0, target=cpu, verify="none")
    with pytest.raises(CorruptSampleError, match=rf"shard shard-00000\.tps offset {off} \(sample 5\)"):
        next(iter(L))


def test_dropping_the_loader_stops_its_workers_promptly(shards, cpu):
    """No reference cycle: dropping the last reference shuts the persistent workers down (not a 5 s join timeout each)."""
    import time

    L = make_loader(shards["jpeg"], batch_size=8, num_workers=2, image_size=16, seed=1, target=cpu)
    L.set_epoch(0)
    assert len([x for x, _ in L]) > 0
    workers = list(L._dl._iterator._workers)
    assert workers and all(w.is_alive() for w in workers)
    t = time.perf_counter()
    del L  # no gc.collect(): reference counting alone must free it
    deadline = time.perf_counter() + 4.0
    while any(w.is_alive() for w in workers) and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert not any(w.is_alive() for w in workers)
    assert time.perf_counter() - t < 4.0


def test_workers_normalise_into_float_slots_and_fall_back_to_uint8_without_shm_room(shards, cpu, monkeypatch):
    """CPU targets: workers write normalised float32 into the shared ring and the batch handed out is the slot
    itself; with too little /dev/shm the ring is uint8 and the consumer normalises -- the same floats."""
    from torchport.data import decode, loader as loader_mod

    kw = dict(batch_size=4, train=True, image_size=24, seed=9, target=cpu, return_indices=True)
    L = make_loader(shards["jpeg"], num_workers=2, **kw)
    L.set_epoch(2)
    fused = []
    it = iter(L)
    for x, y, i in it:
        assert L._slots.dtype == torch.float32
        base, size = L._slots.data_ptr(), L._slots.numel() * 4
        assert base <= x.data_ptr() < base + size  # zero-copy: the worker's slot
        fused.append((x.clone(), i.clone()))
    L.close()
    monkeypatch.setattr(loader_mod, "_shm_room", lambda nbytes: False)
    U = make_loader(shards["jpeg"], num_workers=2, **kw)
    plain = _collect(U, 2)
    assert U._slots.dtype == torch.uint8
    U.close()
    monkeypatch.undo()
    monkeypatch.setattr(decode, "_native_state", (None, "simplejpeg (forced by test)"))  # numpy fallbacks, forked
    N = make_loader(shards["jpeg"], num_workers=2, **kw)
    numpy_path = _collect(N, 2)
    N.close()
    assert len(fused) == len(plain) == len(numpy_path) == 36 // 4
    for (xf, i_f), (xu, _, iu), (xn, _, i_n) in zip(fused, plain, numpy_path):
        assert torch.equal(i_f, iu) and torch.equal(i_f, i_n)
        assert torch.equal(xf, xu) and torch.equal(xf, xn)  # bit-identical floats on all three paths


def test_a_float_slot_batch_stays_valid_until_the_next_but_one_is_requested(shards, cpu):
    L = make_loader(shards["predecoded"], batch_size=2, image_size=24, seed=3, num_workers=2, target=cpu)
    L.set_epoch(0)
    it = iter(L)
    held, _ = next(it)
    copy = held.clone()
    for _ in range(1):  # the next batch may be requested and used while `held` is still read
        nxt, _ = next(it)
        assert torch.equal(held, copy)
    assert L._slots.dtype == torch.float32
    L.close()
