"""DataLoader policy for the selected backend.

Example::

    loader = DataLoader(dataset, batch_size=64, shuffle=True, **torchport.loader_kwargs(seed=0))
"""

from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["loader_kwargs", "cpu_budget"]


def cpu_budget() -> int:
    """CPU cores this process may use: affinity mask divided by LOCAL_WORLD_SIZE (torchrun)."""
    from torchport.env import env_int

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS / Windows
        cores = os.cpu_count() or 1
    local_world = env_int("LOCAL_WORLD_SIZE", 1) or 1
    return max(1, cores // max(1, local_world))


def loader_kwargs(
    target: Any = None,
    *,
    num_workers: int | None = None,
    seed: int = 0,
    rank: int | None = None,
    prefetch_factor: int = 2,
    persistent_workers: bool | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``torch.utils.data.DataLoader`` on the selected backend.

    Args:
        target: a :class:`~torchport.runtime.device.Target`; default the current one.
        num_workers: default: the CPU budget minus one for the main process (at most 8).
        seed: base seed for the shuffling generator and the workers.
        rank: global rank mixed into worker seeds; default ``RANK`` or 0.
        prefetch_factor: batches prefetched per worker.
        persistent_workers: default True when there are workers.

    Returns:
        ``pin_memory`` (only where the backend benefits), ``num_workers``,
        ``persistent_workers``, ``prefetch_factor`` (only with workers), ``generator``
        and ``worker_init_fn`` (seeded from base seed, worker id and rank).

    Note:
        Augmentation that must be identical across worker counts should draw its
        randomness from (seed, epoch, index), not from the worker RNG
        (see :mod:`torchport.data`).
    """
    import torch

    from torchport.env import env_int
    from torchport.errors import ConfigError
    from torchport.runtime.device import current

    target = target or current()
    if num_workers is None:
        num_workers = min(8, max(0, cpu_budget() - 1))
    if num_workers < 0:
        raise ConfigError(f"num_workers={num_workers} must be >= 0")
    if rank is None:
        rank = env_int("RANK", 0) or 0
    kw: dict[str, Any] = {
        "pin_memory": bool(target.backend.pin_memory),
        "num_workers": num_workers,
        "generator": torch.Generator().manual_seed(seed + 1_000_003 * rank),
        "worker_init_fn": functools.partial(_seed_worker, base_seed=seed, rank=rank),
    }
    if num_workers > 0:
        kw["persistent_workers"] = True if persistent_workers is None else persistent_workers
        kw["prefetch_factor"] = prefetch_factor
    return kw


def quiet_worker(worker_id: int = 0) -> None:
    """``worker_init_fn`` part every torchport DataLoader runs: ignore SIGINT in the worker.

    Ctrl-C reaches every process of the terminal's group: the main process stops the run (one line) and
    shuts its workers down; a worker must not print its own KeyboardInterrupt traceback on the way out.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _seed_worker(worker_id: int, *, base_seed: int, rank: int) -> None:
    from torchport.runtime.seed import seed_worker

    quiet_worker(worker_id)
    seed_worker(worker_id, base_seed=base_seed, rank=rank)
