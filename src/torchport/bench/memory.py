"""Memory per rank, DDP vs FSDP, on the same model (``torchport bench memory``).

For each strategy and process count, ``torchrun`` launches N ranks (one process runs without torchrun:
DDP and FSDP are the same thing there). Every rank builds the model on the device, wraps it (DDP, or FSDP2
via :func:`torchport.runtime.fsdp.shard_model`), builds AdamW, takes two training steps on a synthetic batch
and reports:

* ``state_mib`` -- parameters + optimizer state THIS rank holds (a ``DTensor`` counts its local shard only):
  exact, the number FSDP divides by N;
* ``peak_mib`` -- the device allocator's peak over the steps where the backend reports one (None on CPU,
  which has no allocator statistics);
* ``rss_mib`` -- the process's peak resident memory (includes torch itself, a few hundred MiB).

Example::

    from torchport.bench.memory import run_memory_bench
    rows = run_memory_bench("resnet18", nprocs=(1, 2, 4), device="cpu")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["run_memory_bench", "print_memory_table", "STRATEGIES"]

STRATEGIES = ("ddp", "fsdp")
_MIB = 1 << 20


def run_memory_bench(model: str = "resnet18", *, nprocs: tuple[int, ...] = (1, 2, 4), device: str = "cpu",
                     batch_size: int = 8, image_size: int = 64, num_classes: int = 100,
                     timeout: float = 600.0) -> list[dict[str, Any]]:
    """One row per (strategy, process count): the worst rank's ``state_mib``, ``peak_mib`` and ``rss_mib``.

    Raises:
        RuntimeError: a launch failed (its output's last lines are in the message).
    """
    from torchport.models import check_model_name

    check_model_name(model)
    rows = []
    for n in nprocs:
        for strategy in (STRATEGIES[:1] if n == 1 else STRATEGIES):
            ranks, note = _launch(strategy, n, model=model, device=device, batch_size=batch_size,
                                  image_size=image_size, num_classes=num_classes, timeout=timeout)
            worst = {k: max((r[k] for r in ranks if r[k] is not None), default=None) for k in ("state_mib", "peak_mib", "rss_mib")}
            rows.append({"strategy": strategy if n > 1 else "one process", "nproc": n, "model": model,
                         "device": ranks[0]["device"] if ranks else device, **worst, "note": note})
    return rows


def _launch(strategy: str, n: int, *, timeout: float, **kw: Any) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="torchport-mem-") as out:
        worker = ["-m", "torchport.bench.memory", "--out", out, "--strategy", strategy,
                  *[a for k, v in kw.items() for a in (f"--{k.replace('_', '-')}", str(v))]]
        launcher = [] if n == 1 else ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n)]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        proc = subprocess.run([sys.executable, *launcher, *worker], env=env, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            unsupported = next((ln for ln in lines if "FSDP on " in ln and "use --strategy ddp" in ln), None)
            if unsupported:      # the backend cannot host FSDP: a row that says so, not a crash of the table
                return [], unsupported.split("ConfigError: ")[-1].strip()
            tail = "\n".join(lines[-8:])
            raise RuntimeError(f"bench memory: {strategy} on {n} process(es) failed (exit {proc.returncode}):\n{tail}")
        return [json.loads(p.read_text()) for p in sorted(Path(out).glob("rank*.json"))], None


def print_memory_table(rows: list[dict[str, Any]], console: Any = None) -> None:
    """The rows as a rich table, with each row's state as a fraction of one process's."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    base = next((r["state_mib"] for r in rows if r["nproc"] == 1), None)
    table = Table(title=f"memory per rank: {rows[0]['model']} on {rows[0]['device']}" if rows else "memory per rank")
    for col in ("strategy", "ranks", "state MiB", "x 1 proc", "peak dev MiB", "peak RSS MiB"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    fmt = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
    for r in rows:
        share = f"{r['state_mib'] / base:.2f}" if base and r["state_mib"] is not None else "-"
        table.add_row(r["strategy"], str(r["nproc"]), fmt(r["state_mib"]), share, fmt(r["peak_mib"]), fmt(r["rss_mib"]))
    console.print(table)
    console.print("state = parameters + optimizer state held by one rank (the part FSDP divides by N)")
    for r in rows:
        if r.get("note"):
            console.print(f"{r['strategy']} on {r['nproc']}: {r['note']}")


def _worker(argv: list[str] | None = None) -> None:
    """One rank: build, wrap, two AdamW steps, write ``rank<R>.json``."""
    import argparse
    import resource

    ap = argparse.ArgumentParser()
    for name, typ in (("out", str), ("strategy", str), ("model", str), ("device", str), ("batch-size", int),
                      ("image-size", int), ("num-classes", int)):
        ap.add_argument(f"--{name}", type=typ, required=True)
    a = ap.parse_args(argv)
    import torch

    from torchport.models import build_model
    from torchport.runtime import distributed as dist
    from torchport.runtime.fsdp import shard_model, state_bytes
    from torchport.runtime.memory import memory_stats, reset_peak_memory, synchronize

    target = dist.init_distributed(None if a.device == "auto" else a.device)
    torch.manual_seed(0)
    model = build_model(a.model, num_classes=a.num_classes, image_size=a.image_size).to(target.device)
    wrapped = shard_model(model, target) if a.strategy == "fsdp" else dist.wrap_ddp(model, target)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    reset_peak_memory(target)
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=target.device)
    y = torch.randint(0, a.num_classes, (a.batch_size,), device=target.device)
    for _ in range(2):
        torch.nn.functional.cross_entropy(wrapped(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(target)
    peak = memory_stats(target).get("peak_bytes")
    row = {"rank": dist.rank(), "device": str(target), "state_mib": state_bytes(model, optimizer)["total"] / _MIB,
           "peak_mib": None if peak is None else peak / _MIB,
           "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    Path(a.out, f"rank{dist.rank()}.json").write_text(json.dumps(row))
    dist.barrier()
    dist.destroy()


if __name__ == "__main__":
    _worker()
