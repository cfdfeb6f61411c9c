"""One rank of the distributed smoke test (launched by torchrun; see :mod:`torchport.checks.distributed`).

Every stage appends one JSON line to ``<out>/rank<R>.jsonl`` *before* and after it runs,
so when a rank hangs or dies the parent knows exactly where. Stages: ``start``,
``init`` (process group with the device's backend), ``all_reduce`` (sum of rank+1),
``barrier`` (with a timeout), ``weights`` (hash of the initial weights, compared across
ranks with MIN/MAX all-reduces), ``fsdp`` (shard with FSDP2, one step, gather, compare with the
same step in one process), ``done``.

Fault injection for testing the check itself (``TORCHPORT_CHECK_DIST_FAULT``):
``hang:R`` -- rank R sleeps before the barrier; ``exit:R`` -- rank R exits with status 3
before the all-reduce; ``weights:R`` -- rank R seeds its model differently; ``fsdp:R`` -- rank R
feeds its FSDP shard a shifted input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
import time
from typing import Any

FAULT_ENV = "TORCHPORT_CHECK_DIST_FAULT"


class _Log:
    def __init__(self, out: str, rank: int) -> None:
        self.path = os.path.join(out, f"rank{rank}.jsonl")
        self.t0 = time.perf_counter()

    def __call__(self, stage: str, status: str, **info: Any) -> None:
        rec = {"stage": stage, "status": status, "t": round(time.perf_counter() - self.t0, 3), **info}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _fault() -> tuple[str, int]:
    kind, _, rank = os.environ.get(FAULT_ENV, "").partition(":")
    return kind, int(rank) if rank.isdigit() else -1


def main(argv: list[str] | None = None) -> int:
    """Run the stages for this rank; exit status 0 when all passed here."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--emulate", action="store_true")
    ap.add_argument("--barrier-timeout", type=float, default=30.0)
    ap.add_argument("--sys-path", action="append", default=[])
    args = ap.parse_args(argv)
    for p in args.sys_path:
        if p not in sys.path:
            sys.path.append(p)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    log = _Log(args.out, rank)
    log("start", "ok", pid=os.getpid(), world_size=world)
    import torch

    if args.emulate:
        from torchport.emulate import install

        install(max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    import torch.distributed as dist

    from torchport.runtime.distributed import barrier, dist_backend, init_distributed

    kind, frank = _fault()
    timeout = dt.timedelta(seconds=args.barrier_timeout)
    log("init", "begin")
    try:
        target = init_distributed(args.device, timeout=timeout)
        log("init", "ok", backend=dist.get_backend(), expected=dist_backend(target), device=str(target.device))
    except Exception as exc:
        log("init", "error", error=f"{type(exc).__name__}: {exc}"[:500])
        return 2
    dev = target.device
    if kind == "exit" and frank == rank:
        log("all_reduce", "begin")
        os._exit(3)
    log("all_reduce", "begin")
    try:
        t = torch.tensor([float(rank + 1)], device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        log("all_reduce", "ok", value=float(t.item()), expected=world * (world + 1) / 2)
    except Exception as exc:
        log("all_reduce", "error", error=f"{type(exc).__name__}: {exc}"[:500])
        return 2
    if kind == "hang" and frank == rank:
        log("barrier", "begin")
        time.sleep(3600)
    log("barrier", "begin")
    t0 = time.perf_counter()
    try:
        barrier(timeout)
        log("barrier", "ok", seconds=round(time.perf_counter() - t0, 3))
    except Exception as exc:
        log("barrier", "error", error=f"{type(exc).__name__}: {exc}"[:500], seconds=round(time.perf_counter() - t0, 3))
        return 2
    log("weights", "begin")
    try:
        from torchport.checks.target import load_target
        from torchport.runtime.seed import seed_everything

        tgt = load_target(args.target)
        seed_everything(tgt.seed + (1 if kind == "weights" and frank == rank else 0))
        model = tgt.build_model()
        h = hashlib.sha256()
        for name, v in model.state_dict().items():
            h.update(name.encode() + v.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        digest = h.hexdigest()
        words = torch.tensor([int(digest[i:i + 15], 16) for i in range(0, 60, 15)], dtype=torch.int64, device=dev)
        lo, hi = words.clone(), words.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        agree = bool(torch.equal(lo.cpu(), hi.cpu()))
        log("weights", "ok" if agree else "mismatch", hash=digest[:16], agree=agree)
    except Exception as exc:
        log("weights", "error", error=f"{type(exc).__name__}: {exc}"[:500])
        return 2
    log("fsdp", "begin")
    try:
        log("fsdp", **_fsdp_step(tgt, target, rank, world, perturb=kind == "fsdp" and frank == rank))
    except Exception as exc:
        log("fsdp", "error", error=f"{type(exc).__name__}: {exc}"[:500])
        return 2
    log("done", "ok")
    dist.destroy_process_group()
    return 0


def _fsdp_step(tgt: Any, target: Any, rank: int, world: int, *, perturb: bool = False) -> dict[str, Any]:
    """Shard the target's model with FSDP2, take one SGD step on this rank's slice of one global batch, gather
    the weights and compare them with the same step taken by one process over every slice.

    Eval mode for both (BatchNorm statistics and dropout would make a per-rank slice differ from the whole
    batch by design)."""
    import copy

    import torch

    from torchport.checks.target import LoaderSpec, iter_batches, split_batch
    from torchport.errors import ConfigError
    from torchport.runtime.fsdp import full_state_dict, shard_model, state_bytes
    from torchport.runtime.seed import seed_everything

    seed_everything(tgt.seed)
    model = tgt.build_model().to(target.device)
    reference = copy.deepcopy(model)
    try:
        sharded = shard_model(model, target)
    except ConfigError as exc:          # the backend's process group cannot host FSDP: say so, do not fail
        return {"status": "unsupported", "reason": str(exc)}
    inputs, targets, _ = split_batch(next(iter(iter_batches(tgt, LoaderSpec(seed=tgt.seed, batch_size=tgt.batch_size), 1))))
    per = inputs.shape[0] // world
    inputs, targets = inputs[: per * world].to(target.device), targets[: per * world].to(target.device)
    loss_fn = tgt.build_loss(target.device)
    xs, ys = inputs.split(per), targets.split(per)
    # The sharded model: this rank's slice (FSDP averages the ranks' gradients). The one process: the mean of the
    # same per-slice losses -- the identical objective, even for a loss that is not a plain mean (class weights).
    objectives = ((sharded, lambda net: loss_fn(net(xs[rank] + (1.0 if perturb else 0.0)), ys[rank])),  # perturb: a fault
                  (reference, lambda net: sum(loss_fn(net(x), y) for x, y in zip(xs, ys)) / world))
    for net, objective in objectives:
        net.eval()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        objective(net).backward()
        opt.step()
    got, want = full_state_dict(sharded), {k: v.detach().cpu() for k, v in reference.state_dict().items()}
    diff = max(float((got[k].double() - want[k].double()).abs().max()) for k in want if want[k].is_floating_point())
    share = state_bytes(sharded)["params"] / max(1, state_bytes(reference)["params"])
    return {"status": "ok", "max_abs_diff": diff, "param_share": round(share, 4)}


if __name__ == "__main__":
    sys.exit(main())
