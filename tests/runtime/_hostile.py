"""Hostile checkpoints for the safe-loading tests: a DCP checkpoint whose ``.metadata`` or one non-tensor item is a
planted pickle (``os.system`` touching a marker file), its manifest resealed as a publisher would."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from pathlib import Path


class Planted:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def reseal(ckpt: Path) -> None:
    """Recompute ``manifest.json`` over every file (what whoever publishes the checkpoint also writes)."""
    files = {p.name: {"sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "bytes": p.stat().st_size}
             for p in sorted(ckpt.iterdir()) if p.is_file() and p.name != "manifest.json"}
    (ckpt / "manifest.json").write_text(json.dumps({"files": files}))


def plant_metadata(ckpt: Path, marker: Path) -> None:
    (ckpt / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
    reseal(ckpt)


def plant_item(ckpt: Path, marker: Path, fqn: str = "optim.param_groups.0.lr") -> None:
    """Point the non-tensor item ``fqn`` at a planted zip (torch.save of :class:`Planted`) in a new shard file."""
    import torch
    from torch.distributed.checkpoint.filesystem import _StorageInfo

    meta = pickle.loads((ckpt / ".metadata").read_bytes())      # our own file: plain pickle is fine here
    buf = io.BytesIO()
    torch.save(Planted(marker), buf)
    (ckpt / "__9_0.distcp").write_bytes(buf.getvalue())
    key = next(k for k in meta.storage_data if k.fqn == fqn)
    meta.storage_data[key] = _StorageInfo(relative_path="__9_0.distcp", offset=0, length=len(buf.getvalue()))
    (ckpt / ".metadata").write_bytes(pickle.dumps(meta))
    reseal(ckpt)


def point_item(ckpt: Path, relative_path: str, fqn: str = "model.0.weight") -> None:
    """Make the ``.metadata`` name ``relative_path`` (``../x``, a symlink) as the file of item ``fqn``."""
    meta = pickle.loads((ckpt / ".metadata").read_bytes())
    for k, info in list(meta.storage_data.items()):
        if k.fqn == fqn:
            info.relative_path = relative_path
    (ckpt / ".metadata").write_bytes(pickle.dumps(meta))
    reseal(ckpt)
