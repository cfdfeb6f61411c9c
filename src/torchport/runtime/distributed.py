"""Distributed training on any backend: init from torchrun's environment, DDP wrapping, rank helpers.

Example (launch with ``torchrun --nproc-per-node N train.py``)::

    target = torchport.init_distributed()          # nccl on GPUs, hccl on Ascend, gloo on CPU
    model = torchport.wrap_ddp(model.to(target.device))
    if torchport.is_main_process():
        save(...)
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

from torchport.errors import ExitCode, TorchportError

__all__ = [
    "DistributedError",
    "collective_failure",
    "collective_timeout",
    "init_distributed",
    "wrap_ddp",
    "data_parallel",
    "rank",
    "world_size",
    "local_rank",
    "is_main_process",
    "barrier",
    "all_reduce_mean",
    "destroy",
    "dist_backend",
    "DataParallelUnsupported",
]


class DataParallelUnsupported(RuntimeError):
    """``torch.nn.DataParallel`` was asked for on a backend that does not support it."""


def _dist():
    import torch.distributed as dist

    return dist


def _initialized() -> bool:
    dist = _dist()
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """Global rank (0 when not distributed)."""
    from torchport.env import env_int

    return _dist().get_rank() if _initialized() else (env_int("RANK", 0) or 0)


def world_size() -> int:
    """Number of processes (1 when not distributed)."""
    from torchport.env import env_int

    return _dist().get_world_size() if _initialized() else (env_int("WORLD_SIZE", 1) or 1)


def local_rank() -> int:
    """Rank within this node (torchrun's ``LOCAL_RANK``; 0 when unset)."""
    from torchport.env import env_int

    return env_int("LOCAL_RANK", 0) or 0


def is_main_process() -> bool:
    """True on global rank 0 (log, write checkpoints, print only here)."""
    return rank() == 0


def dist_backend(target: Any = None) -> str:
    """The collective backend for ``target``: torch's default for the device type when it
    knows one (``torch.distributed.get_default_backend_for_device``), else the backend record's."""
    from torchport.runtime.device import current

    t = target or current()
    fn = getattr(_dist(), "get_default_backend_for_device", None)
    if fn is not None:
        try:
            return fn(t.type)
        except Exception:
            pass
    return t.backend.dist_backend


#: Seconds a collective may wait for the other ranks (``TORCHPORT_COLLECTIVE_TIMEOUT_S``; default 600).
COLLECTIVE_TIMEOUT_ENV = "TORCHPORT_COLLECTIVE_TIMEOUT_S"


def collective_timeout() -> _dt.timedelta:
    """The collective timeout: ``$TORCHPORT_COLLECTIVE_TIMEOUT_S`` seconds, else 10 minutes.

    Raises:
        ConfigError: the variable is not a positive number."""
    from torchport.errors import ConfigError

    raw = os.environ.get(COLLECTIVE_TIMEOUT_ENV, "").strip()
    if not raw:
        return _dt.timedelta(minutes=10)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigError(f"{COLLECTIVE_TIMEOUT_ENV}={raw!r} is not a positive number of seconds")
    return _dt.timedelta(seconds=seconds)


class DistributedError(TorchportError, RuntimeError):
    """A collective failed: another rank stopped (exited, was killed) or did not answer in time."""

    exit_code = ExitCode.DISTRIBUTED


#: Fragments of the errors the collective backends and the store raise when a peer is gone or silent.
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "DistBackendError",
              "timed out", "Timed out", "Timeout", "communicator was aborted", "Socket", "Connection refused")


def collective_failure(exc: BaseException) -> "DistributedError | None":
    """A :class:`DistributedError` explaining ``exc`` when it is a collective failing because a peer
    rank is gone or silent (only in a distributed run), else None."""
    if world_size() <= 1 or not isinstance(exc, RuntimeError) or isinstance(exc, TorchportError):
        return None
    text = f"{type(exc).__name__}: {exc}"
    if not any(frag in text for frag in _PEER_GONE):
        return None
    import re

    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    first = re.sub(r"^\[[^\]]*\]\s*", "", first)          # gloo's "[/path/to/pair.cc:545] " prefix
    seconds = collective_timeout().total_seconds()
    return DistributedError(
        f"rank {rank()}: a collective failed because another rank stopped (exited or was killed; the launcher "
        f"names it and its exit code) or did not answer within {seconds:g} s ({COLLECTIVE_TIMEOUT_ENV}): {first[:200]}")


def init_distributed(
    device: str | None = None,
    *,
    backend: str | None = None,
    timeout: _dt.timedelta | None = None,
    require_accelerator: bool | None = None,
):
    """Initialise the process group from torchrun's environment and select this rank's device.

    Without ``WORLD_SIZE`` > 1 this only selects the device. With it, ``LOCAL_RANK`` picks
    the device index and the collective backend follows the device (its record's ``dist_backend``).

    Args:
        device: device name as for :func:`~torchport.select_device` (default auto / env).
        backend: override the collective backend.
        timeout: collective timeout (default :func:`collective_timeout`: ``$TORCHPORT_COLLECTIVE_TIMEOUT_S``
            or 10 minutes). A rank that dies makes the others fail at their next collective
            (:func:`collective_failure` turns that into a :class:`DistributedError`, exit code 8).
        require_accelerator: as for :func:`~torchport.select_device` (default TORCHPORT_REQUIRE_ACCELERATOR).

    Returns:
        The selected :class:`~torchport.runtime.device.Target`.
    """
    from torchport.runtime.device import select_device

    target = select_device(device, require_accelerator=require_accelerator)
    if world_size() <= 1 or _initialized():
        return target
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
    if missing:   # env:// would raise a ValueError traceback on every rank
        from torchport.errors import ConfigError

        raise ConfigError(f"WORLD_SIZE={world_size()} is set but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                          "not: start the ranks with torchrun (or `torchport launch`), or unset WORLD_SIZE for one process")
    if target.is_accelerator:
        target.module.set_device(target.index)
    be = backend or dist_backend(target)
    kwargs: dict[str, Any] = {"backend": be, "timeout": timeout if timeout is not None else collective_timeout()}
    store = _attempt_store(kwargs["timeout"])
    if store is not None:
        kwargs.update(store=store, rank=rank(), world_size=world_size())
    if target.is_accelerator and "device_id" in _dist().init_process_group.__code__.co_varnames:
        kwargs["device_id"] = target.device
    try:
        _dist().init_process_group(**kwargs)
    except TypeError:
        kwargs.pop("device_id", None)
        _dist().init_process_group(**kwargs)
    return target


#: Prefix of this restart attempt's keys in torchrun's store (``TORCHELASTIC_RESTART_COUNT``).
_ATTEMPT_PREFIX = "torchport/attempt-"


def _attempt_store(timeout: _dt.timedelta):
    """Under torchrun with ``--max-restarts``: torch's own ``env://`` store, its keys prefixed by the restart
    attempt; None otherwise (plain ``env://``).

    torchrun keeps ONE store for every attempt, and the collective backends publish their addresses in it under
    fixed keys: without the prefix a restarted rank can read the address of a rank of the dead attempt and fail
    to connect ("Connection refused") -- a race that loses often enough to break elastic restarts."""
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if restart is None or "MASTER_ADDR" not in os.environ:
        return None
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "True") != "True":
        # no shared store: every rendezvous round's workers get a store of their own, nothing stale to avoid, and
        # a replacement node's restart count (0) differs from the survivors' -- a prefix would split the job
        return None
    dist = _dist()
    store, _rank, _world = next(dist.rendezvous("env://", rank=rank(), world_size=world_size(), timeout=timeout))
    return dist.PrefixStore(f"{_ATTEMPT_PREFIX}{restart}", store)


def wrap_ddp(model: Any, target: Any = None, **kwargs: Any) -> Any:
    """Wrap ``model`` in DistributedDataParallel with the right ``device_ids`` for the backend.

    Returns the model unchanged when not running distributed.
    """
    import torch

    from torchport.runtime.device import current

    if not _initialized():
        return model
    t = target or current()
    if t.is_accelerator:
        kwargs.setdefault("device_ids", [t.index])
        kwargs.setdefault("output_device", t.index)
    return torch.nn.parallel.DistributedDataParallel(model, **kwargs)


def data_parallel(model: Any, target: Any = None, **kwargs: Any) -> Any:
    """``torch.nn.DataParallel`` where the backend supports it; a clear error elsewhere."""
    import torch

    from torchport.runtime.device import current

    t = target or current()
    if not t.backend.data_parallel:
        raise DataParallelUnsupported(
            f"torch.nn.DataParallel is not supported on backend {t.backend.label!r}. Use DistributedDataParallel: "
            "launch with `torchrun --nproc-per-node N script.py`, call torchport.init_distributed() and "
            "model = torchport.wrap_ddp(model)."
        )
    return torch.nn.DataParallel(model, **kwargs)  # noqa: TP303 (guarded by the backend record above)


def barrier(timeout: _dt.timedelta | float = 60.0) -> None:
    """Barrier that fails after ``timeout`` instead of hanging (no-op when not distributed).

    Raises:
        RuntimeError: naming the timeout, when some rank did not arrive in time.
    """
    if not _initialized():
        return
    dist = _dist()
    if not isinstance(timeout, _dt.timedelta):
        timeout = _dt.timedelta(seconds=float(timeout))
    if dist.get_backend() == dist.Backend.GLOO:   # torch implements monitored_barrier for this one only
        dist.monitored_barrier(timeout=timeout)
        return
    work = dist.barrier(async_op=True)
    if not work.wait(timeout=timeout):
        raise RuntimeError(f"barrier did not complete within {timeout.total_seconds():.0f}s on rank {rank()}")


def all_reduce_mean(value: float, target: Any = None) -> float:
    """Mean of a Python number across ranks (the value itself when not distributed)."""
    if not _initialized():
        return float(value)
    import torch

    from torchport.runtime.device import current

    t = target or current()
    tensor = torch.tensor([float(value)], dtype=torch.float64 if not t.is_accelerator else torch.float32, device=t.device)
    _dist().all_reduce(tensor)
    return float(tensor.item()) / world_size()


def destroy() -> None:
    """Destroy the process group if one is initialised."""
    if _initialized():
        _dist().destroy_process_group()
