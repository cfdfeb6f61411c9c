"""Sharded data parallelism on any backend: PyTorch's FSDP2 (``fully_shard``), made portable.

Nothing here is a sharding engine: :func:`shard_model` builds a one-dimensional device mesh on the
selected device type (whatever :func:`init_distributed` joined, with that backend's own process group)
and calls ``torch.distributed.fsdp.fully_shard`` on every child module that holds parameters, then
on the root. Parameters, gradients and optimizer state then live as ``DTensor`` shards: each rank
holds about ``1/N`` of them (:func:`state_bytes` measures it).

AMP maps onto FSDP's ``MixedPrecisionPolicy`` where that is the right tool (:func:`mixed_precision_policy`):

* ``fp32``: no policy (full precision everywhere);
* ``bf16``: ``param_dtype=bfloat16`` (the all-gathered parameters and the forward/backward compute run in
  bf16), ``reduce_dtype=float32`` (gradients are reduce-scattered in fp32, the sharded master weights
  and the optimizer stay fp32). The loop's autocast context stays on for the ops autocast keeps in fp32
  (softmax, losses). BatchNorm layers keep fp32 parameters (their own unit, inputs cast to fp32): their
  running statistics are fp32;
* ``fp16``: no parameter cast -- fp16 needs a loss scaler, and a scaler over fp32 master weights with
  autocast is the well-trodden path, so fp16 stays autocast + GradScaler exactly as under DDP.

Example (launch with ``torchrun --nproc-per-node N train.py``)::

    target = torchport.init_distributed()
    amp = torchport.Amp("bf16", target)
    model = shard_model(build_model().to(target.device), target, amp=amp)
    optimizer = torch.optim.AdamW(model.parameters())    # built AFTER sharding: it sees the shards
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

__all__ = ["shard_model", "mixed_precision_policy", "is_sharded", "gradient_sync", "state_bytes", "full_state_dict"]


def mixed_precision_policy(amp: Any = None):
    """FSDP2's ``MixedPrecisionPolicy`` for a :class:`torchport.Amp` (None: full precision, no policy).

    Only bf16 becomes a policy (bf16 parameters for compute, fp32 gradient reduction); fp32 and fp16 return
    None (fp16 keeps autocast + GradScaler over fp32 weights, see the module docstring)."""
    import torch

    if amp is None or getattr(amp, "dtype", None) is not torch.bfloat16:
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def shard_model(model: Any, target: Any = None, *, amp: Any = None, reshard_after_forward: bool = True) -> Any:
    """Shard ``model`` in place with FSDP2 across every rank of the process group; returns it.

    Every direct child holding parameters becomes one FSDP unit (its parameters are all-gathered just
    before it runs and freed after), then the root takes the rest. Build the optimizer **after** this call:
    sharding replaces the parameters by ``DTensor`` shards.

    Args:
        model: a module already on ``target``'s device.
        target: the :class:`~torchport.runtime.device.Target` (default: the current one).
        amp: a :class:`torchport.Amp`; bf16 becomes a ``MixedPrecisionPolicy`` (:func:`mixed_precision_policy`).
        reshard_after_forward: free the gathered parameters after the forward (less memory, one more
            all-gather in the backward).

    Returns:
        ``model`` itself (sharded), or unchanged when not running distributed -- one process holds everything,
        so there is nothing to shard and the single-process path stays the plain module.

    Note:
        BatchNorm buffers are not sharded and not synchronised (unlike DDP, which broadcasts rank 0's buffers
        every forward): each rank keeps its own running statistics, and a checkpoint stores rank 0's.
    """
    from torchport.runtime import distributed as dist
    from torchport.runtime.device import current

    if not dist._initialized() or dist.world_size() <= 1:
        return model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    t = target or current()
    try:
        mesh = init_device_mesh(t.type, (dist.world_size(),))
    except RuntimeError as exc:
        if "name not set" not in str(exc):
            raise
        from torchport.errors import ConfigError

        raise ConfigError(f"FSDP on {t}: its {dist.dist_backend(t)!r} process group registers no named backend, so "
                          "torch cannot build the device mesh FSDP2 needs; use --strategy ddp on this backend") from None
    kwargs: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": reshard_after_forward}
    policy = mixed_precision_policy(amp)
    if policy is not None:
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy
        from torch.nn.modules.batchnorm import _BatchNorm

        # BatchNorm keeps fp32 parameters: its running statistics are fp32 buffers, and batch_norm wants one
        # dtype. Each BN becomes its own unit whose inputs are cast to fp32; the next unit casts back to bf16.
        fp32 = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32)
        for module in model.modules():
            if isinstance(module, _BatchNorm) and any(True for _ in module.parameters()):
                fully_shard(module, **kwargs, mp_policy=fp32)
        kwargs["mp_policy"] = policy
    for child in model.children():
        if any(True for _ in child.parameters()):
            fully_shard(child, **kwargs)
    fully_shard(model, **kwargs)
    return model


def is_sharded(model) -> bool:
    """True when ``model`` (or a wrapper around it) was sharded by :func:`shard_model` / ``fully_shard``."""
    from torch.distributed.fsdp import FSDPModule

    from torchport.runtime.checkpoint import unwrap_model

    return isinstance(unwrap_model(model), FSDPModule)


@contextlib.contextmanager
def gradient_sync(model, enabled: bool) -> Iterator[None]:
    """Gradient accumulation for a sharded model: with ``enabled=False`` the backward keeps the unsharded
    gradients local (no reduce-scatter) until a backward with ``enabled=True`` -- FSDP2's equivalent of
    DDP's ``no_sync()``. A no-op for a model that is not sharded."""
    if not is_sharded(model) or enabled:
        yield
        return
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def state_bytes(model, optimizer: Any = None) -> dict[str, int]:
    """Bytes THIS rank holds for parameters and optimizer state (a ``DTensor`` counts its local shard only).

    Returns:
        ``{"params": ..., "optimizer": ..., "total": ...}`` -- under FSDP about ``1/N`` of a DDP rank's.
    """
    import torch

    def local(t) -> int:
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    params = sum(local(p.detach()) for p in model.parameters())
    opt = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            opt += sum(local(v) for v in state.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
    return {"params": params, "optimizer": opt, "total": params + opt}


def full_state_dict(model) -> dict[str, Any]:
    """The model's complete, unsharded state dict on CPU on every rank (all-gathers the shards; plain
    ``state_dict`` for a model that is not sharded) -- for comparisons and export, not for checkpoints
    (those stay sharded: :mod:`torchport.runtime.dcp`)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from torchport.runtime.checkpoint import to_cpu, unwrap_model

    module = unwrap_model(model)
    if not is_sharded(module):
        return to_cpu(module.state_dict())
    return to_cpu(get_model_state_dict(module, options=StateDictOptions(full_state_dict=True)))
