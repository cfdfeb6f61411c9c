"""Shard sets in a real S3 server: pack to s3://, stream samples, cache, faults, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchport.data.synth import make_dataset


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    make_dataset(root, classes=3, train_per_class=12, val_per_class=4, size=40, quality=90, seed=0)
    return root


def _local_and_remote(folder, tmp_path, url, mode="jpeg"):
    from torchport.data.pack import pack

    pack(folder / "train", tmp_path / "local", mode=mode, size=32, workers=1, shard_bytes=16 << 10)
    rep = pack(folder / "train", url, mode=mode, size=32, workers=1, shard_bytes=16 << 10)
    return tmp_path / "local", rep


def test_pack_to_url_uploads_and_never_writes_a_local_s3_folder(folder, tmp_path, store_env, monkeypatch):
    from torchport.storage import store

    monkeypatch.chdir(tmp_path)
    url = store_env + "/ds/train"
    local, rep = _local_and_remote(folder, tmp_path, url)
    assert rep["destination"] == url and rep["written"] == 36 and rep["shards"] >= 3
    names = store.listdir(url)
    assert "index.json" in names and "index.npy" in names and sum(n.endswith(".tps") for n in names) == rep["shards"]
    assert not (tmp_path / "s3:").exists() and not any(p.name.startswith("s3:") for p in tmp_path.iterdir())
    # same bytes as the local pack
    for n in names:
        if n.endswith(".tps") or n == "index.npy":
            assert store.read_bytes(store.join(url, n)) == (local / n).read_bytes(), n
    with pytest.raises(FileExistsError, match="--overwrite"):
        from torchport.data.pack import pack

        pack(folder / "train", url, mode="jpeg", workers=1)


@pytest.mark.parametrize("mode", ["jpeg", "predecoded"])
def test_same_pixels_from_disk_and_store(folder, tmp_path, store_env, mode, monkeypatch):
    """Same (seed, epoch, index) -> same pixels, local shards vs the store (read through range requests)."""
    from torchport.data.dataset import ShardDataset
    from torchport.data.format import ShardSet

    monkeypatch.setenv("TORCHPORT_STORAGE_BLOCK_MB", "0.0625")  # 64 KiB blocks: samples straddle blocks
    url = store_env + f"/{mode}"
    local, _ = _local_and_remote(folder, tmp_path, url, mode=mode)
    a = ShardDataset(local, size=24, train=True, seed=3, verify="full")
    b = ShardDataset(url, size=24, train=True, seed=3, verify="full")
    assert b.shards.remote is not None and isinstance(b.root, str)
    for epoch in (0, 1):
        idx = np.random.default_rng(epoch).permutation(len(a))[:20]
        ba, bb = a[(epoch, idx)], b[(epoch, idx)]
        assert (ba.images.numpy() == bb.images.numpy()).all()
        assert (ba.labels.numpy() == bb.labels.numpy()).all()
    s = ShardSet.open(url, verify="quick")
    assert s.verify(full=True, samples=True).ok
    # nothing downloaded whole: the cache holds blocks no larger than the block size
    cache = Path(os.environ["TORCHPORT_STORAGE_CACHE"])
    blocks = [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock") and "-65536-" in p.name]
    assert blocks and max(p.stat().st_size for p in blocks) <= 65536


def test_opening_checks_headers_without_fetching_blocks(folder, tmp_path, store_env, monkeypatch):
    """Opening (verify="quick") reads each shard's 64-byte header with a ranged GET of its own: the block cache
    stays empty (before: block 0 plus 2 read-ahead blocks of every shard, on every node of a cluster)."""
    from torchport.data.format import ShardSet

    monkeypatch.setenv("TORCHPORT_STORAGE_BLOCK_MB", "0.0625")
    url = store_env + "/open"
    _, rep = _local_and_remote(folder, tmp_path, url)
    s = ShardSet.open(url, verify="quick")
    assert rep["shards"] >= 3 and s.remote is not None
    import time

    time.sleep(0.5)                                    # read-ahead, had any been scheduled, runs in threads
    cache = Path(os.environ["TORCHPORT_STORAGE_CACHE"])
    blocks = [p for p in cache.rglob("*") if p.is_file() and "-65536-" in p.name]
    assert blocks == []
    assert len(s.raw(len(s) - 1))                      # samples still stream after the light open
    # the light read still checks the header: same size, one header byte changed -> named, not opened
    from torchport.data.errors import ShardCorruptError
    from torchport.storage import store

    name = sorted(n for n in store.listdir(url) if n.endswith(".tps"))[1]
    data = bytearray(store.read_bytes(store.join(url, name)))
    data[0] ^= 0xFF
    store.write_bytes(store.join(url, name), bytes(data))
    with pytest.raises(ShardCorruptError, match=f"{name}.*bad header"):
        ShardSet.open(url, verify="quick")


def test_damaged_object_is_named(folder, tmp_path, store_env):
    from torchport.data.errors import ShardCorruptError
    from torchport.data.format import ShardSet
    from torchport.storage import store

    url = store_env + "/dmg"
    _local_and_remote(folder, tmp_path, url)
    name = next(n for n in store.listdir(url) if n.endswith(".tps"))
    data = store.read_bytes(store.join(url, name))
    store.write_bytes(store.join(url, name), data[:-100])
    with pytest.raises(ShardCorruptError, match=name):
        ShardSet.open(url, verify="quick")


def test_missing_url_and_unreachable_endpoint_are_clear_errors(store_env, monkeypatch):
    from torchport.data.errors import ShardFormatError
    from torchport.data.format import ShardSet
    from torchport.errors import ExitCode, StorageError
    from torchport.storage import store

    with pytest.raises(ShardFormatError, match="no index.json.*torchport data pack"):
        ShardSet.open(store_env + "/nothing-here")
    with pytest.raises(StorageError, match="does not exist") as e:
        store.read_bytes("s3://no-such-bucket-xyz/a")
    assert e.value.exit_code == ExitCode.IO
    monkeypatch.setenv("TORCHPORT_STORAGE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("TORCHPORT_STORAGE_RETRIES", "2")
    store._CLIENTS.clear()
    with pytest.raises(StorageError, match=r"cannot reach the object store at http://127.0.0.1:9.*--storage-endpoint"):
        ShardSet.open(store_env + "/x")


def test_cli_pack_verify_inspect_and_errors(folder, tmp_path, store_env):
    url = store_env + "/cli"
    env = dict(os.environ)
    run = lambda *a: subprocess.run([sys.executable, "-m", "torchport", *a], capture_output=True, text=True, env=env,  # noqa: E731
                                    cwd=tmp_path, timeout=300)
    r = run("data", "pack", str(folder), url, "--workers", "1", "--json", "rep.json")
    assert r.returncode == 0, r.stderr
    assert set(json.loads((tmp_path / "rep.json").read_text())) == {"train", "val"}
    assert not (tmp_path / "s3:").exists()
    r = run("data", "verify", url, "--json", "v.json")
    assert r.returncode == 0, r.stdout + r.stderr
    v = json.loads((tmp_path / "v.json").read_text())
    assert v["train"]["ok"] and v["val"]["ok"] and "sample crc32" in v["train"]["checked"]
    r = run("data", "inspect", url + "/train")
    assert r.returncode == 0 and "36" in r.stdout
    env["TORCHPORT_STORAGE_ENDPOINT"], env["TORCHPORT_STORAGE_RETRIES"] = "http://127.0.0.1:9", "1"
    r = run("data", "verify", url)
    assert r.returncode == 6 and "cannot reach the object store" in r.stderr and "Traceback" not in r.stderr
    assert "testing" not in r.stderr + r.stdout  # credentials never printed


def test_doctor_reports_the_store(store_env, tmp_path):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "torchport", "doctor", "--store", store_env + "/x", "--json", "-"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["store"]
    assert st["reachable"] is True and st["listable"] is True and st["endpoint"] == os.environ["AWS_ENDPOINT_URL"]
    assert st["credentials"].startswith("environment") and "testing" not in r.stdout

    from torchport.storage.doctor import store_report

    os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # restored by store_env's monkeypatch
    st = store_report(None)
    assert st["reachable"] is False and [p["id"] for p in st["problems"]] == ["store-unreachable"]
    del os.environ["AWS_ENDPOINT_URL"]
    assert store_report(None) is None  # nothing configured: no store section


def test_auto_order_is_shard_aware_in_the_store_only(folder, tmp_path, store_env):
    from torchport.data.loader import make_loader

    url = store_env + "/ord"
    local, _ = _local_and_remote(folder, tmp_path, url)
    kw = dict(batch_size=4, train=True, image_size=16, num_workers=0, rank=1, world_size=2)
    remote_loader, local_loader = make_loader(url, **kw), make_loader(local, **kw)
    assert remote_loader.sampler.order == "shards" and local_loader.sampler.order == "global"
    assert make_loader(local, order="shards", **kw).sampler.rank_indices().tolist() == \
        remote_loader.sampler.rank_indices().tolist()


def test_obs_urls_use_the_obs_endpoint(store_env, monkeypatch):
    """obs:// is OBS through its S3 endpoint: TORCHPORT_OBS_ENDPOINT (here the test server) wins for obs:// only."""
    from torchport.errors import StorageError
    from torchport.storage import store

    bucket = store_env.split("://", 1)[1]
    monkeypatch.setenv("TORCHPORT_OBS_ENDPOINT", os.environ["AWS_ENDPOINT_URL"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # s3:// now points nowhere
    monkeypatch.setenv("TORCHPORT_STORAGE_RETRIES", "1")
    store._CLIENTS.clear()
    store.write_bytes(f"obs://{bucket}/o/x.bin", b"obs!")
    assert store.read_range(f"obs://{bucket}/o/x.bin", 1, 4) == b"bs!"
    with pytest.raises(StorageError, match="cannot reach"):
        store.read_bytes(f"s3://{bucket}/o/x.bin")
    monkeypatch.delenv("TORCHPORT_OBS_ENDPOINT")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("OBS_REGION", "cn-north-4")
    assert store.endpoint_for("obs") == "https://obs.cn-north-4.myhuaweicloud.com"
    monkeypatch.delenv("OBS_REGION")
    with pytest.raises(StorageError, match="TORCHPORT_OBS_ENDPOINT"):
        store.endpoint_for("obs")


def test_interrupted_upload_is_never_a_shard_set(folder, tmp_path, store_env):
    """The manifest goes last: an upload that dies half-way leaves a prefix nobody reads as data."""
    from torchport.data.errors import ShardFormatError
    from torchport.data.format import ShardSet, is_shard_dir
    from torchport.data.pack import pack
    from torchport.storage import store
    from torchport.storage.shards import upload_shard_dir

    local = tmp_path / "p"
    pack(folder / "train", local, mode="jpeg", workers=1, shard_bytes=16 << 10)
    (local / "shard-00002.tps").unlink()  # the upload fails on this file
    url = store_env + "/half"
    with pytest.raises(FileNotFoundError, match="local file does not exist"):
        upload_shard_dir(local, url, workers=1)
    assert "shard-00000.tps" in store.listdir(url) and "index.json" not in store.listdir(url)
    assert not is_shard_dir(url)
    with pytest.raises(ShardFormatError, match="no index.json"):
        ShardSet.open(url)


def test_train_cli_store_errors_are_one_line(store_env, tmp_path):
    env = {**os.environ, "TORCHPORT_STORAGE_ENDPOINT": "http://127.0.0.1:9", "TORCHPORT_STORAGE_RETRIES": "1",
           "TORCHPORT_CACHE": str(tmp_path / "c")}
    r = subprocess.run([sys.executable, "-m", "torchport", "train", "--data", store_env + "/nothing", "--epochs", "1",
                        "--run-dir", str(tmp_path / "r"), "--progress", "none"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 6, r.stderr[-2000:]
    assert "cannot reach the object store at http://127.0.0.1:9" in r.stderr and "Traceback" not in r.stderr
    # an explicit --resume URL: the run's checkpoints go next to it
    from torchport.runtime.checkpoint import CheckpointError, CheckpointManager
    from torchport.train.config import TrainConfig
    from torchport.train.rundir import _decide, checkpoint_dir_for

    ck = store_env + "/runs/x/checkpoints"
    CheckpointManager(ck).save({"w": 1}, step=3)
    cfg = TrainConfig(resume=ck + "/ckpt-000000003.pt", runs_root=str(tmp_path / "runs"))
    run_dir, resume = _decide(cfg)
    assert resume == ck + "/ckpt-000000003.pt" and checkpoint_dir_for(cfg, run_dir) == ck
    with pytest.raises(CheckpointError, match="does not exist"):
        _decide(TrainConfig(resume=ck + "/ckpt-000000009.pt", runs_root=str(tmp_path / "runs")))


def test_readahead_stays_inside_the_rank_slice(folder, tmp_path, store_env, monkeypatch):
    """The read-ahead follows the blocks this rank reads this epoch (the loader's plan from its sampler): reading
    rank 0's slice of 3 fills the node cache with blocks of rank 0's shards only (before: past the end of a shard,
    the next shard in the index -- another rank's, on another node), and it still reads ahead inside the slice."""
    from torchport.data.loader import make_loader
    from torchport.data.pack import pack

    monkeypatch.setenv("TORCHPORT_STORAGE_BLOCK_MB", "0.0625")
    url = store_env + "/slice"
    rep = pack(folder / "train", url, mode="jpeg", size=32, workers=1, shard_bytes=4 << 10)
    assert rep["shards"] >= 6
    from torchport.runtime.device import select_device

    loader = make_loader(url, batch_size=2, train=True, image_size=16, seed=0, num_workers=0, rank=0, world_size=3,
                         target=select_device("cpu", warn=False))
    shards = loader.dataset.shards
    remote = shards.remote
    assert loader.sampler.order == "shards"
    cache = Path(os.environ["TORCHPORT_STORAGE_CACHE"])
    sha_of = {s["sha256"][:40]: sid for sid, s in enumerate(remote.shards)}

    def cached_shards() -> set[int]:
        if remote._pool is not None:
            remote._pool.shutdown(wait=True)           # the read-ahead threads have finished
            remote._pool = None
        return {sha_of[p.name.split("-")[0]] for p in cache.rglob("*") if p.is_file() and "-65536-" in p.name}

    for epoch in (0, 1):
        loader.set_epoch(epoch)
        mine = loader.sampler.rank_indices(epoch)
        order = list(dict.fromkeys(shards._shard_col[mine].tolist()))    # rank 0's shards, in reading order
        first = set(shards._shard_col[mine[:2]].tolist())                # what its first batch reads
        assert len(order) < len(remote.shards)
        it = iter(loader)
        next(it)
        seen = cached_shards()
        assert seen - first, "no read-ahead after the first batch"
        assert seen <= set(order), f"epoch {epoch}: read ahead into shards {sorted(seen - set(order))} of other ranks"
        for _ in it:
            pass
        assert cached_shards() <= set(order), f"epoch {epoch}: the read-ahead left the rank's slice"
        for p in cache.rglob("*"):                       # a fresh cache for the next epoch's check
            if p.is_file() and "-65536-" in p.name:
                p.unlink()
