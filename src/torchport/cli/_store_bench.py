"""``torchport data bench --data s3://...``: the same shards from the object store vs from local disk.

Same run, same loader settings, same workers, same sample order; the shard set is downloaded once
to local disk for the comparison. Per round (interleaved, median of rounds reported):

* ``local`` -- an epoch from the local copy (page cache warm: the second epoch of its loader);
* ``store cold`` -- an epoch from the store with the block cache emptied first (every byte fetched);
* ``store warm`` -- the next epoch, served from the block cache;
* ``store faulty`` -- cache emptied, every request through :class:`~torchport.storage.faults.FaultProxy`
  injecting ``fault_rate`` transient errors (500 / 503 / dropped / reset connections).

Worker start-up is excluded from every pipeline (each loader runs one untimed epoch first). Every
store epoch checks that each sample of the rank's epoch arrived exactly once (``lost``/``extra``).
Targets: cold >= 0.5x local, warm >= 0.95x, faulty >= 0.4x with zero lost samples.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

__all__ = ["run_store_bench", "render_store_table", "STORE_TARGETS"]

STORE_TARGETS = {"store cold": 0.5, "store warm": 0.95, "store faulty": 0.4}


def _download(url: str, dst: Path) -> Path:
    from torchport.data.format import ShardSet
    from torchport.storage import store

    if (dst / "index.json").is_file():
        with contextlib.suppress(Exception):
            ShardSet.open(dst, verify="quick")
            return dst
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in store.listdir(url):
        store.get_file(store.join(url, name), tmp / name)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    return dst


def _epoch(loader) -> tuple[float, int, Counter]:
    """(seconds, images, index counts) of one epoch."""
    seen: Counter = Counter()
    n = 0
    t0 = time.perf_counter()
    for images, labels, idx in loader:
        n += int(labels.shape[0])
        seen.update(idx.tolist())
    return time.perf_counter() - t0, n, seen


def _clear(cache_dir: Path) -> None:
    for p in cache_dir.iterdir() if cache_dir.is_dir() else []:
        if p.is_dir() and p.name not in ("in",):  # keep the (tiny) index entries
            shutil.rmtree(p, ignore_errors=True)


def run_store_bench(url: str, *, workers: int = 2, batch_size: int = 64, size: int = 224, rounds: int = 3,
                    fault_rate: float = 0.1, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure local vs store (cold / warm / faulty); returns the result record."""
    from torchport import backends
    from torchport.data.loader import make_loader
    from torchport.data.synth import cache_dir
    from torchport.runtime.device import Target
    from torchport.storage import store
    from torchport.storage.faults import FaultProxy

    from torchport.storage.shards import load_manifest

    url = url.rstrip("/")
    manifest = load_manifest(url)
    if manifest is None:
        from torchport.errors import StorageError

        raise StorageError(f"{url} holds no torchport shard set (no index.json); pack one with `torchport data pack SRC {url}`")
    # keyed by content (the index checksum), so a re-packed set at the same URL is downloaded again
    tag = hashlib.sha256((url + manifest["index"]["sha256"]).encode()).hexdigest()[:16]
    local = _download(url, cache_dir() / "bench-store" / tag)
    if len(manifest["shards"]) < 2 * workers:
        log(f"note: {len(manifest['shards'])} shard(s) for {workers} workers; smaller shards (--shard-mb) spread the reads")
    log(f"local copy of {url}: {local}")
    bench_cache = Path(tempfile.mkdtemp(prefix="torchport-bench-store-"))
    old_env = {k: os.environ.get(k) for k in ("TORCHPORT_STORAGE_CACHE", "TORCHPORT_STORAGE_ENDPOINT")}
    os.environ["TORCHPORT_STORAGE_CACHE"] = str(bench_cache)
    cpu = Target(backend=backends.get("cpu"), index=0, reason="argument")
    kw = dict(batch_size=batch_size, train=True, image_size=size, seed=0, num_workers=workers, target=cpu,
              augment="cpu", verify="quick", order="shards", drop_last=False, return_indices=True)
    results: dict[str, list[float]] = {k: [] for k in ("local", "store cold", "store warm", "store faulty")}
    integrity: dict[str, dict[str, int]] = {}
    proxy = None
    try:
        local_loader = make_loader(local, **kw)
        store_loader = make_loader(url, **kw)
        expected = Counter(store_loader.sampler.rank_indices().tolist())
        endpoint = store.endpoint_for(store.split_url(url)[0])
        proxy = FaultProxy(endpoint, rate=fault_rate, seed=0).start()
        os.environ["TORCHPORT_STORAGE_ENDPOINT"] = proxy.url  # the faulty loader's workers inherit it
        store._CLIENTS.clear()
        faulty_loader = make_loader(url, **kw)
        for name, loader in (("local", local_loader), ("store", store_loader), ("faulty", faulty_loader)):
            loader.set_epoch(0)
            _epoch(loader)  # untimed: starts the workers (and, for the store, fills the cache once)
        epoch = 1
        for r in range(rounds):
            for name, loader in (("local", local_loader), ("store cold", store_loader), ("store warm", store_loader),
                                 ("store faulty", faulty_loader)):
                if name in ("store cold", "store faulty"):
                    _clear(bench_cache)
                loader.set_epoch(epoch)
                secs, n, seen = _epoch(loader)
                rate = n / secs
                results[name].append(rate)
                if name != "local":
                    want = Counter(loader.sampler.rank_indices().tolist())
                    lost = sum((want - seen).values())
                    extra = sum((seen - want).values())
                    agg = integrity.setdefault(name, {"epochs": 0, "samples": 0, "lost": 0, "extra": 0})
                    agg["epochs"] += 1
                    agg["samples"] += n
                    agg["lost"] += lost
                    agg["extra"] += extra
                log(f"round {r + 1}/{rounds}: {name:<13} {rate:8.0f} img/s ({n} images, {secs:.2f}s)")
            epoch += 1
        del expected
        for loader in (local_loader, store_loader, faulty_loader):
            with contextlib.suppress(Exception):
                loader.close()
    finally:
        if proxy is not None:
            proxy.stop()
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        store._CLIENTS.clear()
        shutil.rmtree(bench_cache, ignore_errors=True)
    base = statistics.median(results["local"])
    table = {}
    for name, vals in results.items():
        med = statistics.median(vals)
        row: dict[str, Any] = {"images_per_s": round(med, 1), "ratio_vs_local": round(med / base, 3),
                               "rounds": [round(v, 1) for v in vals]}
        if name in STORE_TARGETS:
            row["target_ratio"] = STORE_TARGETS[name]
            row["meets_target"] = med / base >= STORE_TARGETS[name]
        if name in integrity:
            row.update(integrity[name])
        table[name] = row
    if proxy is not None:
        table["store faulty"]["faults_injected"] = dict(proxy.counts)
    return {
        "benchmark": "torchport data bench --data (object store vs local disk)",
        "config": {"url": url, "local_copy": str(local), "workers": workers, "batch_size": batch_size, "size": size,
                   "rounds": rounds, "fault_rate": fault_rate, "order": "shards"},
        "machine": {"cpus": os.cpu_count(), "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
        "results": table,
    }


def render_store_table(result: dict[str, Any]):
    """A rich Table of :func:`run_store_bench`'s result."""
    from rich.table import Table

    c = result["config"]
    t = Table(title=f"{c['url']} vs local disk ({c['workers']} workers, batch {c['batch_size']}, {c['size']}px); "
                    f"load avg {result['machine']['load_avg']}")
    for col in ("pipeline", "images/s", "vs local", "target", "lost", "extra", "rounds"):
        t.add_column(col, justify="left" if col == "pipeline" else "right")
    for name, r in result["results"].items():
        tgt = r.get("target_ratio")
        mark = "" if tgt is None else (f"[green]>= {tgt}x ok[/]" if r["meets_target"] else f"[red]>= {tgt}x missed[/]")
        t.add_row(name, f"{r['images_per_s']:.0f}", f"{r['ratio_vs_local']:.2f}x", mark, str(r.get("lost", "-")),
                  str(r.get("extra", "-")), " ".join(f"{v:.0f}" for v in r["rounds"]))
    return t
