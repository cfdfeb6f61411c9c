"""Check 4, data determinism: same seed, same batches -- across runs, worker counts and platforms.

Builds the target's loader several times (re-seeding the process RNGs before each
build, as a fresh run would) and fingerprints the first few batches: the sample indices
(when batches carry them) and a SHA-256 of every sample's pixels and label.

* two runs with the same seed give the same batches (``num_workers=0`` and with workers);
* every worker count gives the same batches as ``num_workers=0`` -- per-sample randomness
  must come from ``(seed, epoch, index)``, not from a worker's RNG;
* ``set_epoch`` changes the order; ranks of a 2-process split get different samples;
* against a parity reference (``reference=``), the batch hashes match the ones recorded on
  the other platform.

On a mismatch the evidence names the first differing batch and sample index and the
loader's ``worker_init_fn`` (file:line).

Example::

    from torchport.checks import data_determinism
    r = data_determinism(batches=3, workers=(0, 2))
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path
from typing import Any

from torchport.checks.result import CheckResult, Evidence, Status

__all__ = ["data_determinism", "fingerprint"]

NAME = "data-determinism"


@dataclasses.dataclass
class Fingerprint:
    """What one loader build produced: per batch the indices (or None) and per-sample hashes."""

    indices: list[list[int] | None]
    samples: list[list[str]]
    batch_hashes: list[str]
    worker_init: str | None

    def first_difference(self, other: "Fingerprint") -> str | None:
        """``"batch 0, sample index 17 (position 3)"`` for the first differing sample, or None."""
        for b, (mine, theirs) in enumerate(zip(self.samples, other.samples)):
            for pos, (x, y) in enumerate(zip(mine, theirs)):
                if x != y:
                    idx = self.indices[b][pos] if self.indices[b] is not None else None
                    return f"batch {b}, sample " + (f"index {idx} " if idx is not None else "") + f"(position {pos})"
            if len(mine) != len(theirs):
                return f"batch {b} (sizes {len(mine)} vs {len(theirs)})"
        if len(self.samples) != len(other.samples):
            return f"batch count {len(self.samples)} vs {len(other.samples)}"
        return None


def _sample_hash(x: Any, y: Any) -> str:
    import torch

    h = hashlib.sha256()
    for t in (x, y):
        t = t.detach().cpu().contiguous()
        h.update(f"{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def fingerprint(target: Any, spec: Any, batches: int) -> Fingerprint:
    """Fingerprint the first ``batches`` batches of ``target.build_loader(spec)`` after re-seeding."""
    from torchport.checks.target import split_batch, where_defined
    from torchport.checks.trace import _hash_batch
    from torchport.runtime.seed import seed_everything

    seed_everything(spec.seed)
    loader = target.build_loader(spec)
    wi = getattr(loader, "worker_init_fn", None)
    fp = Fingerprint([], [], [], where_defined(wi) if wi is not None else None)
    for i, batch in enumerate(loader):
        if i >= batches:
            break
        x, y, idx = split_batch(batch)
        fp.indices.append([int(v) for v in idx.reshape(-1).tolist()] if idx is not None else None)
        fp.samples.append([_sample_hash(x[j], y[j]) for j in range(len(x))])
        fp.batch_hashes.append(_hash_batch(x, y))
    del loader  # shut worker processes down now
    return fp


def _same(what: str, a: Fingerprint, b: Fingerprint, *, detail: str, worker_init: str | None = None) -> Evidence:
    diff = a.first_difference(b)
    where = diff
    if diff is not None and worker_init:
        where = f"{diff}; worker_init_fn={worker_init}"
    return Evidence(what=what, measured="identical" if diff is None else "different", threshold="identical",
                    where=where, status=Status.PASS if diff is None else Status.FAIL,
                    detail=None if diff is None else detail)


def data_determinism(target: Any = None, *, batches: int = 3, workers: tuple[int, ...] = (0, 2),
                     reference: str | Path | None = None) -> CheckResult:
    """Run the data-determinism evidence (see module docstring).

    Args:
        target: :class:`~torchport.checks.target.CheckTarget`, spec string or None.
        batches: batches fingerprinted per loader build.
        workers: worker counts compared (the first is the baseline; use ``(0, 2)`` or more).
        reference: a parity ``ref.json`` whose batch hashes (recorded on another platform) must match.

    Returns:
        A :class:`~torchport.checks.result.CheckResult` named ``data-determinism``.
    """
    from torchport.checks.target import LoaderSpec, load_target

    started = time.perf_counter()
    target = load_target(target)
    base_spec = LoaderSpec(seed=target.seed, batch_size=target.batch_size, num_workers=workers[0])
    ev: list[Evidence] = []
    base = fingerprint(target, base_spec, batches)
    if not base.samples:
        return CheckResult(name=NAME, status=Status.FAIL, summary="the loader produced no batches",
                           evidence=[Evidence(what="batches produced", measured=0, threshold=f">= {batches}",
                                              status=Status.FAIL)], seconds=time.perf_counter() - started)
    unseeded = ("Per-sample randomness is not a function of (seed, epoch, index): seed augmentation from them "
                "(see torchport.data) and do not seed workers from time / os.urandom / an unseeded RNG.")
    again = fingerprint(target, base_spec, batches)
    ev.append(_same(f"two runs, same seed, num_workers={workers[0]}", base, again, detail=unseeded,
                    worker_init=base.worker_init))
    for w in workers[1:]:
        fp = fingerprint(target, dataclasses.replace(base_spec, num_workers=w), batches)
        fp2 = fingerprint(target, dataclasses.replace(base_spec, num_workers=w), batches)
        ev.append(_same(f"two runs, same seed, num_workers={w}", fp, fp2, detail=unseeded, worker_init=fp.worker_init))
        ev.append(_same(f"num_workers={w} vs num_workers={workers[0]}", base, fp, worker_init=fp.worker_init,
                        detail="Worker count changes the data: per-sample randomness comes from the worker's RNG. "
                        + unseeded))
    ep1 = fingerprint(target, dataclasses.replace(base_spec, epoch=1), batches)
    if base.indices[0] is not None:
        changed = ep1.indices != base.indices
        measured = "order changed" if changed else "same order"
    else:
        changed = ep1.batch_hashes != base.batch_hashes
        measured = "batches changed" if changed else "same batches"
    ev.append(Evidence(what="set_epoch(1) changes the order", measured=measured, threshold="changed",
                       status=Status.PASS if changed else Status.FAIL,
                       detail=None if changed else "Call sampler.set_epoch(epoch) every epoch (DistributedSampler "
                       "shuffles with seed + epoch), or every epoch repeats the first one's order."))
    r0 = fingerprint(target, dataclasses.replace(base_spec, world_size=2, rank=0), batches)
    r1 = fingerprint(target, dataclasses.replace(base_spec, world_size=2, rank=1), batches)
    if r0.indices and r0.indices[0] is not None:
        i0 = {i for b in r0.indices for i in (b or [])}
        i1 = {i for b in r1.indices for i in (b or [])}
        overlap = sorted(i0 & i1)
        same = r0.indices == r1.indices
        ev.append(Evidence(what="ranks 0 and 1 of 2 get different samples", measured=f"{len(overlap)} shared indices",
                           threshold="0 shared", where=f"indices {overlap[:8]}" if overlap else None,
                           status=Status.FAIL if same else (Status.WARN if overlap else Status.PASS),
                           detail="Split the data by rank (DistributedSampler(num_replicas=world_size, rank=rank))."
                           if overlap else None))
    else:
        same = r0.batch_hashes == r1.batch_hashes
        ev.append(Evidence(what="ranks 0 and 1 of 2 get different batches", measured="same" if same else "different",
                           threshold="different", status=Status.FAIL if same else Status.PASS))
    if reference is not None:
        ev.append(_against_reference(target, reference, batches))
    return CheckResult.from_evidence(NAME, ev, ok=f"{batches} batches identical across runs and worker counts "
                                     f"{list(workers)}; epochs reorder; ranks split", started=started)


def _against_reference(target: Any, reference: str | Path, batches: int) -> Evidence:
    from torchport.checks.target import LoaderSpec, iter_batches, split_batch
    from torchport.checks.trace import _hash_batch
    from torchport.runtime.seed import seed_everything

    from torchport.checks.trace import load_document

    doc = load_document(reference)
    ref_hashes = doc.get("batch_hashes", [])[:batches]
    seed_everything(doc.get("seed", target.seed))
    spec = LoaderSpec(seed=doc.get("seed", target.seed), batch_size=doc.get("batch_size", target.batch_size))
    mine = [_hash_batch(*split_batch(b)[:2]) for b in iter_batches(target, spec, len(ref_hashes))]
    bad = next((i for i, (a, b) in enumerate(zip(ref_hashes, mine)) if a != b), None)
    return Evidence(what=f"batches match the reference recorded on {doc.get('platform', '?')}",
                    measured=f"{len(mine) - (0 if bad is None else len(mine) - bad)}/{len(ref_hashes)} identical",
                    threshold="all identical", where=None if bad is None else f"batch {bad}",
                    status=Status.PASS if bad is None and ref_hashes else (Status.SKIP if not ref_hashes else Status.FAIL))
