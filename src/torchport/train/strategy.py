"""How the trainer spreads one model over the ranks: ``ddp`` (a full copy per rank, gradients all-reduced)
or ``fsdp`` (parameters, gradients and optimizer state sharded, FSDP2). One small interface, so the loop
reads the same for both:

* :meth:`Strategy.wrap` -- after the model is on the device, before the optimizer is built;
* :meth:`Strategy.accumulate` -- the context of a micro-batch's backward (no gradient sync until the last);
* :meth:`Strategy.manager` / :meth:`Strategy.save` / :meth:`Strategy.load` -- checkpoints: DDP writes one file
  on rank 0 (:mod:`torchport.runtime.checkpoint`), FSDP writes shards from every rank (:mod:`torchport.runtime.dcp`).

Example::

    strategy = strategy_for(cfg)                  # from --strategy
    train_model = strategy.wrap(model, target, amp)
    optimizer = build_optimizer(model, ...)       # sees FSDP's shards
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Mapping

__all__ = ["Strategy", "DdpStrategy", "FsdpStrategy", "strategy_for", "manager_for"]

class Strategy:
    """Data-parallel strategy: the four things the loop asks of it. Subclasses override what differs."""

    name = "?"

    def wrap(self, model, target: Any, amp: Any):
        """The module the loop calls (``model`` itself keeps the plain state-dict keys)."""
        raise NotImplementedError

    def accumulate(self, train_model, sync: bool) -> contextlib.AbstractContextManager:
        """Context for one micro-batch's forward+backward; ``sync=False`` defers the gradient reduction."""
        return contextlib.nullcontext()

    def manager(self, directory: Any, keep_last: int):
        """The checkpoint manager of this strategy's format for ``directory``."""
        raise NotImplementedError

    def save(self, manager, *, step: int, model, optimizer, amp, scheduler, progress: Mapping[str, Any],
             config: Mapping[str, Any], window_loss: Any = None):
        """Checkpoint ``step`` (collective). Refuses a poisoned state: every rank first agrees that its weights
        and ``window_loss`` are finite. Returns the path on rank 0 (None elsewhere for DDP)."""
        from torchport.runtime import distributed as dist
        from torchport.train.errors import NonFiniteLossError

        ok = _finite(model) and (window_loss is None or math.isfinite(float(window_loss)))
        if dist.all_reduce_mean(1.0 if ok else 0.0) < 1.0:
            raise NonFiniteLossError(f"non-finite weights or loss at step {step}: refusing to write a checkpoint; "
                                      f"the last good one is {manager.latest()}")
        return self._save(manager, step=step, model=model, optimizer=optimizer, amp=amp, scheduler=scheduler,
                          progress=progress, config=config)

    def _save(self, manager, **kw):
        raise NotImplementedError

    def load(self, manager, path: Any, *, model, optimizer, amp, scheduler, trust: bool = False) -> dict[str, Any]:
        """Restore everything from checkpoint ``path`` (found by ``manager``); returns its progress dict. Every
        file is read as data unless ``trust`` (``--trust-checkpoint``)."""
        raise NotImplementedError


class DdpStrategy(Strategy):
    """A full replica per rank (``DistributedDataParallel``); rank 0 writes single-file checkpoints."""

    name = "ddp"

    def wrap(self, model, target, amp):
        from torchport.runtime import distributed as dist

        return dist.wrap_ddp(model, target)

    def accumulate(self, train_model, sync):
        no_sync = getattr(train_model, "no_sync", None)
        return no_sync() if (not sync and no_sync is not None) else contextlib.nullcontext()

    def manager(self, directory, keep_last):
        from torchport.runtime.checkpoint import CheckpointManager

        return CheckpointManager(directory, keep_last=keep_last)

    def _save(self, manager, *, step, model, optimizer, amp, scheduler, progress, config):
        from torchport.runtime import checkpoint as ckpt
        from torchport.runtime import distributed as dist

        if not dist.is_main_process():
            return None
        state = ckpt.capture(model=model, optimizer=optimizer, amp=amp, scheduler=scheduler, progress=progress,
                             config=config)
        return manager.save(state, step=step)

    def load(self, manager, path, *, model, optimizer, amp, scheduler, trust=False):
        from torchport.runtime import checkpoint as ckpt

        return ckpt.restore(ckpt.load(path, weights_only=not trust), model=model, optimizer=optimizer, amp=amp, scheduler=scheduler,
                            source=path)   # mismatch messages name the checkpoint


class FsdpStrategy(Strategy):
    """FSDP2: parameters, gradients and optimizer state sharded over the ranks; every rank writes its shards
    (DCP), and a checkpoint resumes on any world size."""

    name = "fsdp"

    def wrap(self, model, target, amp):
        from torchport.runtime.fsdp import shard_model

        return shard_model(model, target, amp=amp)

    def accumulate(self, train_model, sync):
        from torchport.runtime.fsdp import gradient_sync

        return gradient_sync(train_model, sync)

    def manager(self, directory, keep_last):
        from torchport.runtime.dcp import DcpCheckpointManager

        return DcpCheckpointManager(directory, keep_last=keep_last)

    def _save(self, manager, *, step, model, optimizer, amp, scheduler, progress, config):
        from torchport.runtime import checkpoint as ckpt
        from torchport.runtime import distributed as dist

        extra = ckpt.capture(amp=amp, scheduler=scheduler, progress=progress, config=config)
        path = manager.save(step=step, model=model, optimizer=optimizer, extra=extra)
        return path if dist.is_main_process() else None

    def load(self, manager, path, *, model, optimizer, amp, scheduler, trust=False):
        return manager.load(path, model=model, optimizer=optimizer, amp=amp, scheduler=scheduler, trust=trust)


_STRATEGIES = {"ddp": DdpStrategy, "fsdp": FsdpStrategy}


def strategy_for(cfg) -> Strategy:
    """The :class:`Strategy` named by ``cfg.strategy``."""
    return _STRATEGIES[cfg.strategy]()


def manager_for(cfg, directory: Any):
    """The checkpoint manager for ``cfg``'s strategy (file checkpoints for ddp, DCP directories for fsdp)."""
    return strategy_for(cfg).manager(directory, cfg.keep_last)


def _finite(model) -> bool:
    """Every parameter of this rank (its local shard under FSDP) is finite."""
    import torch

    flags = [_local(p.detach()).isfinite().all() for p in model.parameters()]
    return bool(torch.stack(flags).all().item()) if flags else True


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t
