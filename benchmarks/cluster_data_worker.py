"""The per-process half of ``bench_cluster.py --only data`` (issue 33 #5), and its S3 helper for ``--only loss-s3``:

    python benchmarks/cluster_data_worker.py setup URL SRC    # wait for the S3 server, make the bucket, pack SRC to URL
                                                              # (SRC with train/ and val/ folders: each to URL/<split>)
    python benchmarks/cluster_data_worker.py bucket URL       # wait for the S3 server, make the bucket
    python benchmarks/cluster_data_worker.py fetch URL DST    # copy every object under URL to DST (JSON: keys, latest)
    torchrun ... benchmarks/cluster_data_worker.py read URL OUT [EPOCHS]   # every rank: read its share, 2 epochs

``setup`` runs where the server is reachable (inside node 0's network namespace, or on loopback); ``read`` runs
on every rank of the rehearsal: torchport's loader over ``s3://`` shards (shard-aware order, rank slices), the
node's block cache (``TORCHPORT_CACHE`` of its own), ``--workers 0``. Per epoch each rank records the samples it
read, the seconds, the cache blocks its reads touched and the node's cache files before / after the epoch; rank 0
writes them all to ``OUT`` (JSON) for the benchmark to turn into the data table.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def bucket(url: str) -> None:
    """Wait for the S3 server (AWS_ENDPOINT_URL) and make the bucket of ``url``."""
    import urllib.request

    import boto3

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).read()
            break
        except Exception:
            if time.time() > deadline:
                raise SystemExit(f"setup: the S3 server at {endpoint} did not answer within 60 s")
            time.sleep(0.3)
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=url.split("/")[2])


def fetch(url: str, dst: str) -> None:
    """Copy every object under ``url`` to the folder ``dst``; print ``{"keys": [...], "latest": ...}``."""
    import boto3

    b, _, prefix = url[len("s3://"):].partition("/")
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=prefix.rstrip("/") + "/")
            for o in page.get("Contents", [])]
    for k in keys:
        out = Path(dst) / k[len(prefix.rstrip("/")) + 1:]
        out.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(b, k, str(out))
    latest = Path(dst) / "latest.json"
    print(json.dumps({"keys": sorted(keys), "latest": latest.read_text() if latest.is_file() else None}), flush=True)


def setup(url: str, src: str) -> None:
    """Make the bucket and pack ``src`` to ``url`` (an ImageFolder), or each of its ``train`` / ``val`` ImageFolders
    to ``url/train``, ``url/val`` (what ``train --data URL`` opens); print each pack report."""
    bucket(url)
    from torchport.data.pack import pack

    splits = [s for s in ("train", "val") if (Path(src) / s).is_dir()]
    for s in splits or [""]:
        report = pack(str(Path(src) / s) if s else src, f"{url}/{s}" if s else url, mode="jpeg", workers=1,
                      shard_bytes=int(os.environ.get("BENCH_SHARD_BYTES", 1 << 16)))
        print(json.dumps({"split": s, **{k: report.get(k) for k in ("num_samples", "shards", "bytes") if k in report}}),
              flush=True)


def _files(root: Path) -> dict[str, int]:
    if not root.is_dir():
        return {}
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")
            and not p.name.startswith(".")}


def read(url: str, out: str, epochs: int = 2) -> None:
    import torch.distributed as dist

    from torchport.data.loader import make_loader
    from torchport.runtime.device import select_device
    from torchport.storage.cache import default_cache_dir

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    node = int(os.environ.get("GROUP_RANK", "0"))
    cache_dir = default_cache_dir()
    dist.barrier()
    pristine = _files(cache_dir)
    loader = make_loader(url, batch_size=16, train=True, image_size=32, seed=0, num_workers=0,
                         target=select_device("cpu", warn=False))
    remote = loader.dataset.shards.remote
    touched: set[str] = set()
    read_blocks = remote.read

    def counting_read(sid: int, start: int, end: int) -> bytes:   # the blocks this rank's samples live in
        for b in range(start // remote.block, max(start, end - 1) // remote.block + 1):
            touched.add(str(remote.cache.path(remote._key(sid, b))))
        return read_blocks(sid, start, end)

    remote.read = counting_read
    dist.barrier()
    opened = _files(cache_dir)       # what opening fetched: the index, and each shard's header block (quick verify)
    records = [{"epoch": -1, "rank": rank, "node": node, "samples": 0, "seconds": 0.0, "touched": [],
                "before": pristine, "after": opened}]
    for epoch in range(epochs):
        dist.barrier()
        before = _files(cache_dir)
        touched.clear()
        loader.set_epoch(epoch)
        t0, n = time.perf_counter(), 0
        for _images, labels in loader:
            n += int(labels.shape[0])
        seconds = time.perf_counter() - t0
        dist.barrier()
        records.append({"epoch": epoch, "rank": rank, "node": node, "samples": n, "seconds": seconds,
                        "touched": sorted(touched), "before": before, "after": _files(cache_dir)})
    gathered: list = [None] * world
    dist.all_gather_object(gathered, records)
    if rank == 0:
        Path(out).write_text(json.dumps({"world": world, "block": remote.block,
                                         "num_samples": int(loader.dataset.shards.manifest["num_samples"]),
                                         "dataset_bytes": sum(s["bytes"] for s in remote.shards),
                                         "shards": [s["bytes"] for s in remote.shards],
                                         "records": [r for rs in gathered for r in rs]}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "bucket":
        bucket(sys.argv[2])
    elif sys.argv[1] == "fetch":
        fetch(sys.argv[2], sys.argv[3])
    else:
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 2)
