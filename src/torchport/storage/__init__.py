"""torchport.storage: training data and checkpoints on object storage (S3, Huawei OBS, MinIO ...).

``s3://bucket/prefix`` and ``obs://bucket/prefix`` are accepted wherever torchport takes a data or
checkpoint path (``train --data/--resume/--checkpoint-dir``, ``data pack/verify/inspect``,
``data bench --data``, :func:`torchport.data.make_loader`, :mod:`torchport.runtime.checkpoint`).

Pieces: :mod:`~torchport.storage.store` (URLs, configuration, retried requests, errors),
:mod:`~torchport.storage.cache` (node-local block cache), :mod:`~torchport.storage.shards`
(streamed shard reads, upload), :mod:`~torchport.storage.faults` (a fault-injecting S3 proxy for
tests and benchmarks); the local vs store throughput benchmark is :mod:`torchport.cli._store_bench`.
Importing this package imports nothing heavy; names load on first use.
"""

from __future__ import annotations

from torchport._lazy import lazy_exports

_EXPORTS = {
    "is_url": "torchport.storage.store",
    "split_url": "torchport.storage.store",
    "join": "torchport.storage.store",
    "configure": "torchport.storage.store",
    "endpoint_for": "torchport.storage.store",
    "STATS": "torchport.storage.store",
    "BlockCache": "torchport.storage.cache",
    "RemoteShards": "torchport.storage.shards",
    "upload_shard_dir": "torchport.storage.shards",
    "FaultProxy": "torchport.storage.faults",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
