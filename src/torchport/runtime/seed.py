"""Seeding and RNG state capture for python, numpy, torch and every available device.

Example::

    torchport.seed_everything(1234)
    state = rng_state()          # for checkpoints
    set_rng_state(state)
"""

from __future__ import annotations

import os
import random
from typing import Any

__all__ = ["seed_everything", "rng_state", "set_rng_state", "seed_worker", "worker_seed"]


def seed_everything(seed: int, *, deterministic: bool = False) -> int:
    """Seed python, numpy, torch (CPU) and every available accelerator backend.

    Args:
        seed: the base seed.
        deterministic: also ask torch for deterministic algorithms (slower; errors on
            ops without a deterministic implementation are turned into warnings).

    Returns:
        ``seed``.
    """
    import numpy as np
    import torch

    from torchport import backends

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    for spec in backends.specs():
        if spec.is_accelerator and spec.probe():
            spec.module().manual_seed_all(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    return seed


def rng_state() -> dict[str, Any]:
    """Every RNG state, as tensors / plain data (saveable with ``weights_only=True``).

    Returns:
        ``{"python": tuple, "numpy": {...}, "torch": ByteTensor, "devices": {type: [ByteTensor per device]}}``.
    """
    import numpy as np
    import torch

    from torchport import backends

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
        "devices": {},
    }
    for spec in backends.specs():
        if spec.is_accelerator and spec.probe():
            state["devices"][spec.name] = [s.cpu() for s in spec.module().get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a :func:`rng_state` snapshot (device states for absent backends are ignored)."""
    import numpy as np
    import torch

    from torchport import backends

    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())
    for name, states in state.get("devices", {}).items():
        try:
            spec = backends.get(name)
        except ValueError:
            continue
        if not spec.probe():
            continue
        count = spec.device_count()
        if len(states) != count:
            import warnings

            warnings.warn(f"RNG states were saved for {len(states)} {name} device(s) but {count} are visible; "
                          f"restoring the first {min(len(states), count)}", RuntimeWarning, stacklevel=2)
        module = spec.module()
        for i, s in enumerate(states[:count]):
            module.set_rng_state(s.cpu(), i)


def worker_seed(base_seed: int, worker_id: int, rank: int = 0) -> int:
    """Seed for one DataLoader worker, mixing base seed, worker id and global rank."""
    import numpy as np

    ss = np.random.SeedSequence([base_seed % 2**32, rank, worker_id])
    return int(ss.generate_state(1, dtype=np.uint64)[0] % 2**63)


def seed_worker(worker_id: int, *, base_seed: int = 0, rank: int = 0) -> None:
    """``worker_init_fn`` seeding python, numpy and torch in a DataLoader worker.

    Use through :func:`torchport.loader_kwargs` (a picklable ``functools.partial``).
    """
    import numpy as np
    import torch

    s = worker_seed(base_seed, worker_id, rank)
    random.seed(s)
    np.random.seed(s % 2**32)
    torch.manual_seed(s)
