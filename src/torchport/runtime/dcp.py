"""Sharded, reshardable checkpoints through ``torch.distributed.checkpoint`` (DCP), local or ``s3://``/``obs://``.

Each rank writes its own shards in parallel; a run saved on N ranks loads on M (DCP reshards on load;
FSDP or not on either side). One checkpoint is a directory ``<dir>/step-<step>/`` holding

* DCP's files -- ``__<rank>_0.distcp`` per rank and ``.metadata`` -- for the model and the optimizer, in
  torch's fully-qualified-name layout (``get_state_dict``: the same keys for a sharded and a plain model);
* ``torchport.pt`` -- everything that is not a sharded tensor (progress, LR schedule, loss scaler, RNG,
  config, versions), a regular :mod:`~torchport.runtime.checkpoint` file with its own checksum;
* ``manifest.json`` -- sha256 and size of every file above, written by rank 0 after all ranks finished.

The commit is ``<dir>/latest.json``, written last (atomically on disk; in an object store a single PUT
after every object is complete), as for the single-file checkpoints. :meth:`DcpCheckpointManager.latest`
returns the newest checkpoint whose files match its manifest and warns about newer damaged ones.

Example (every rank calls every method: they are collective)::

    from torchport.runtime.dcp import DcpCheckpointManager

    manager = DcpCheckpointManager("runs/a/checkpoints", keep_last=2)      # or "s3://bucket/runs/a/ckpt"
    path = manager.latest()                       # decided on rank 0 in the trainer, then shared
    if path:
        progress = manager.load(path, model=model, optimizer=optimizer, scheduler=sched, amp=amp)
    ...
    manager.save(step=step, model=model, optimizer=optimizer, scheduler=sched, amp=amp, progress={...})

Converting between a single-file checkpoint (DDP, one process) and a DCP directory (FSDP) is
:func:`convert`; ``python -m torchport.train.convert SRC DST`` does it for trainer checkpoints.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Mapping

from torchport.runtime.checkpoint import (CheckpointError, CheckpointIntegrityError, CheckpointManager,
                                          CheckpointWriteError, newest_verified)
from torchport.storage import fs

__all__ = ["DcpCheckpointManager", "is_dcp_checkpoint", "save_state", "load_state", "verify", "convert"]

_POINTER = "latest.json"
_MANIFEST = "manifest.json"
_EXTRA = "torchport.pt"
_DIR = re.compile(r"^step-(\d+)$")


# -- where the bytes go: a local directory or an object-store prefix, through one filesystem layer ----------
def _read(path: Any) -> bytes | None:
    return fs.read_bytes(path, missing_ok=True)


def _writer(path: Any):
    import torch.distributed.checkpoint as dcp

    if not fs.remote(path):
        return dcp.FileSystemWriter(str(path), sync_files=True)
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

    return _on_store(FsspecWriter, str(path))


def _reader(path: Any, *, trust: bool = False):
    """The safe DCP reader (:mod:`torchport.runtime.safe_load`): ``.metadata`` through a restricted unpickler,
    non-tensor items with ``weights_only=True``; torch's own reader only with ``trust``."""
    from torchport.runtime.safe_load import dcp_reader

    return dcp_reader(path, trust=trust)


def read_metadata(path: Any, *, trust: bool = False):
    """The DCP ``Metadata`` of checkpoint ``path`` (keys, shapes, dtypes), read through the safe reader.

    Raises:
        CheckpointRefusedError: ``.metadata`` imports something outside the allow-list (nothing ran);
        CheckpointError: missing, empty, truncated or damaged.
    """
    return _dcp_call(lambda: _reader(path, trust=trust).read_metadata(), path, "read")


def _on_store(cls, url: str):
    """DCP's fsspec writer/reader on torchport's configured object-store client (endpoint, credentials and
    addressing as everywhere else; ``obs://`` speaks S3)."""
    from torchport.storage import store

    scheme, bucket, key = store.split_url(url)
    io = cls(f"s3://{bucket}/{key}")                 # builds a client lazily (nothing contacted) ...
    io.fs.fs = store.filesystem(scheme)              # ... replaced by the configured one
    io.path = f"{bucket}/{key}"
    return io


def _dcp_call(fn, path: Any, what: str):
    """Run one DCP save/load; the :class:`~torch.distributed.checkpoint.api.CheckpointException` DCP raises
    with every rank's error (a ``BaseException``, one traceback per rank) becomes one :class:`CheckpointError`
    line: torchport's own error when a rank raised one, else the first rank's reason."""
    from torch.distributed.checkpoint.api import CheckpointException

    from torchport.errors import StorageError, on_every_rank
    from torchport.runtime.safe_load import Fatal

    try:
        return fn()
    except Fatal as exc:
        raise type(exc.error)(str(exc.error)) from None
    except CheckpointException as exc:
        errors = [e[0] if isinstance(e, tuple) else e for _rank, e in sorted(exc.failures.items())]
        errors = [e.error if isinstance(e, Fatal) else e for e in errors]
        # DCP raised this on every rank (it gathers every rank's failure): one line for the run
        for err in errors:
            if isinstance(err, CheckpointError):
                raise on_every_rank(type(err)(str(err))) from None
        err = errors[0] if errors else exc
        cls = CheckpointWriteError if what == "write" else CheckpointError
        raise on_every_rank(cls(_fault_line(path, what, err, ranks=sorted(exc.failures)))) from None
    except (OSError, StorageError) as exc:
        raise (CheckpointWriteError if what == "write" else CheckpointError)(_fault_line(path, what, exc)) from None


def _fault_line(path: Any, what: str, err: BaseException, ranks: list[int] | None = None) -> str:
    """``writing checkpoint P failed (reason); ...`` for a DCP fault (disk full, endpoint down, a missing shard);
    ``ranks``: the ranks that failed, named when not every rank did (whose disk is full, which node)."""
    from torchport.runtime import distributed as dist

    reason = _reason(err)
    world = dist.world_size()
    if ranks and world > 1 and len(ranks) < world:
        reason += f", on rank {ranks[0]}" + (f" and {len(ranks) - 1} more" if len(ranks) > 1 else "")
    if what == "write":
        return (f"writing checkpoint {path} failed ({reason}); the latest pointer was not moved, earlier "
                "checkpoints are intact")
    return f"checkpoint {path} could not be read ({reason}); use an earlier checkpoint (--resume auto)"


def _reason(err: BaseException) -> str:
    """The cause of a checkpoint fault in a few words (one line)."""
    import errno

    from torchport.errors import StorageError

    if isinstance(err, CheckpointError):
        return str(err).splitlines()[0] if str(err).strip() else type(err).__name__
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "the disk is full"
    elif isinstance(err, (FileNotFoundError,)):
        reason = f"a file is missing: {os.path.basename(str(err.filename or ''))}"
    elif isinstance(err, StorageError):
        reason = str(err)
    else:
        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
        reason = f"{type(err).__name__}: {first[:200]}" if first else type(err).__name__
    return reason


# -- the state: model + optimizer through DCP, the rest in one small file ------------------------------------
def _dist_state(model, optimizer) -> dict[str, Any]:
    """``{"model": ..., "optim": ...}`` in torch's FQN layout: ``DTensor`` shards for a sharded model, plain
    tensors otherwise -- the same keys either way, which is what makes DDP <-> FSDP a non-event."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from torchport.runtime.checkpoint import unwrap_model

    module = unwrap_model(model)
    msd, osd = get_state_dict(module, optimizer if optimizer is not None else [])
    return {"model": msd, "optim": osd} if optimizer is not None else {"model": msd}


def is_dcp_checkpoint(path: Any) -> bool:
    """True for a directory (or prefix) holding a DCP checkpoint (its ``.metadata``)."""
    return fs.exists(fs.join(path, ".metadata"))


def save_state(path: Any, *, model, optimizer=None, extra: Mapping[str, Any] | None = None) -> None:
    """Write ``model`` (+ ``optimizer``) shards into the DCP directory ``path`` (collective: every rank calls it)
    and, on rank 0, ``extra`` as ``torchport.pt`` and the ``manifest.json`` of every file. No commit pointer:
    that is :class:`DcpCheckpointManager`'s."""
    import torch.distributed.checkpoint as dcp

    from torchport.runtime import checkpoint as ckpt
    from torchport.runtime import distributed as dist

    _dcp_call(lambda: dcp.save(_dist_state(model, optimizer), storage_writer=_writer(path)), path, "write")
    error = None
    if dist.is_main_process():
        try:
            ckpt.save(dict(extra or {}), fs.join(path, _EXTRA))
            manifest = {name: dict(zip(("sha256", "bytes"), fs.digest(fs.join(path, name))))
                        for name in fs.files(path) if name != _MANIFEST}
            fs.write_atomic(fs.join(path, _MANIFEST), json.dumps({"files": manifest}, indent=1).encode())
        except Exception as exc:  # noqa: BLE001 - every rank must learn that rank 0 failed
            error = exc
    _agree(error, lambda: _write_fault(path, error))


def _write_fault(path: Any, error: BaseException | None) -> CheckpointWriteError:
    """The one line for a save that failed on rank 0 (``error``: what it raised; None on the other ranks)."""
    if isinstance(error, CheckpointError):
        return CheckpointWriteError(str(error).splitlines()[0])
    if error is None:
        return CheckpointWriteError(f"writing checkpoint {path} failed on rank 0 (its own line says why); the "
                                    "latest pointer was not moved, earlier checkpoints are intact")
    return CheckpointWriteError(_fault_line(path, "write", error))


def _agree(error: BaseException | None, make, *, own=None) -> None:
    """Collective: when ``error`` happened on some rank (rank 0's own step of a save), every rank raises the
    error ``make()`` builds -- marked as the run's one line (:func:`~torchport.errors.on_every_rank`) -- instead
    of rank 0 alone failing while the others wait in the next collective. ``own``: when only some ranks failed,
    each of those raises ``own()`` unmarked instead, so its line names the rank and its real reason."""
    from torchport.errors import on_every_rank
    from torchport.runtime import distributed as dist

    failed = dist.all_reduce_mean(0.0 if error is None else 1.0)
    if failed <= 0:
        return
    if own is not None and error is not None and failed < 1:
        raise own() from None
    raise on_every_rank(make()) from None


def verify(path: Any, *, trust: bool = False) -> None:
    """Check every file of the DCP checkpoint ``path`` against its ``manifest.json``, and its ``.metadata`` against the shard files (read through the restricted unpickler unless ``trust``).

    Raises:
        CheckpointError: no manifest (an interrupted save), a missing file, an unreadable ``.metadata``;
        CheckpointRefusedError: ``.metadata`` imports something outside the allow-list (nothing ran);
        CheckpointIntegrityError: a file's size or sha256 differs from what was written, or a shard is shorter
            than its ``.metadata`` says.
    """
    raw = _read(fs.join(path, _MANIFEST))
    if raw is None:
        raise CheckpointError(f"checkpoint {path} has no {_MANIFEST}: its save did not finish; "
                              "use an earlier checkpoint (--resume auto picks the newest complete one)")
    try:
        from torchport._parse import loads

        files = loads(raw, fmt="json", what=str(fs.join(path, _MANIFEST)))["files"]
    except (ValueError, KeyError, TypeError):
        raise CheckpointIntegrityError(f"{fs.join(path, _MANIFEST)} is damaged; use an earlier checkpoint") from None
    present = set(fs.files(path))
    sizes = {}
    for name, want in sorted(files.items()):
        if name not in present:
            raise CheckpointError(f"checkpoint {path} lacks {name} (listed in its manifest); use an earlier checkpoint")
        digest, sizes[name] = fs.digest(fs.join(path, name))
        if (digest, sizes[name]) != (want.get("sha256"), want.get("bytes")):
            raise CheckpointIntegrityError(
                f"checkpoint {path}: {name} fails its checksum (written {want.get('bytes')} bytes, now "
                f"{sizes[name]}): its content changed after it was written; use an earlier checkpoint "
                "(--resume auto picks the newest good one)")
    _check_layout(path, sizes, trust=trust)


def _check_layout(path: Any, sizes: Mapping[str, int], *, trust: bool = False) -> None:
    """The ``.metadata`` (read through the restricted unpickler) parses, and every byte range it names lies in a
    shard file that is there: a checkpoint whose manifest was re-sealed over a damaged or missing file is caught
    here too, before any rank loads it (and ``--resume auto`` falls back past it)."""
    from torchport.paths import plain_name

    try:
        meta = read_metadata(path, trust=trust)     # trust: torch's own reader (plain pickle) for a file you made
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch's reader on a damaged file: one line
        raise CheckpointError(f"checkpoint {path}: its .metadata cannot be read ({type(exc).__name__}); use an "
                              "earlier checkpoint") from None
    for info in (getattr(meta, "storage_data", None) or {}).values():
        rel = getattr(info, "relative_path", None)
        if not plain_name(rel) or rel not in sizes:
            if plain_name(rel):
                raise CheckpointError(f"checkpoint {path} lacks {rel} (named by its .metadata); use an earlier "
                                      "checkpoint")
            continue            # a name out of the directory: the safe reader refuses it, naming it (exit 5)
        end = int(getattr(info, "offset", 0) or 0) + int(getattr(info, "length", 0) or 0)
        if end > sizes[rel]:
            raise CheckpointIntegrityError(f"checkpoint {path}: {rel} is shorter ({sizes[rel]} bytes) than its "
                                           f".metadata says ({end}); use an earlier checkpoint")


def load_state(path: Any, *, model, optimizer=None, strict: bool = True, trust: bool = False) -> dict[str, Any]:
    """Load the DCP checkpoint ``path`` into ``model`` (+ ``optimizer``) on any world size, sharded or not
    (collective); returns its ``torchport.pt`` payload (progress, schedule, scaler, RNG, config).

    Every file is read as data (:mod:`torchport.runtime.safe_load`); ``trust=True`` (``--trust-checkpoint``)
    lifts that for a checkpoint you made yourself.

    Raises:
        CheckpointRefusedError: a file holds something that could run code (nothing was executed);
        CheckpointError: ``path`` is not a DCP checkpoint, or its tensors do not fit this model.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    from torchport.runtime import checkpoint as ckpt
    from torchport.runtime.checkpoint import unwrap_model

    if not is_dcp_checkpoint(path):
        raise CheckpointError(f"{path} is not a sharded (DCP) checkpoint: it has no .metadata. A single-file "
                              "checkpoint converts with `python -m torchport.train.convert SRC DST`")
    state = _dist_state(model, optimizer)
    try:
        _dcp_call(lambda: dcp.load(state, storage_reader=_reader(path, trust=trust)), path, "read")
        set_state_dict(unwrap_model(model), optimizer if optimizer is not None else [],
                       model_state_dict=state["model"], optim_state_dict=state.get("optim", {}),
                       options=StateDictOptions(strict=strict))
    except CheckpointError:
        raise
    except (RuntimeError, KeyError, ValueError) as exc:
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise CheckpointError(f"checkpoint {path} does not fit this model/optimizer: {first[:300]}") from None
    from torchport.runtime import distributed as dist

    error = None
    try:
        extra = ckpt.load(fs.join(path, _EXTRA), weights_only=not trust)
    except CheckpointError as exc:
        if dist.world_size() <= 1:
            raise
        error = exc
    if dist.world_size() > 1:   # every rank reads the same file: its refusal or damage is the run's one line
        first = (lambda: type(error)(str(error).splitlines()[0])) if error is not None else None
        _agree(error, first or (lambda: CheckpointError(
            f"checkpoint {path}: {_EXTRA} could not be loaded on another rank; use an earlier checkpoint")), own=first)
    return extra


class DcpCheckpointManager(CheckpointManager):
    """Step-numbered DCP checkpoints ``<directory>/step-<step>/`` with keep-last-K and a ``latest.json`` commit.

    A :class:`~torchport.runtime.checkpoint.CheckpointManager` whose checkpoints are directories: the same
    surface (``checkpoints``, ``latest``, ``resolve``, ``save``), so the trainer's run-directory logic and
    ``--resume auto`` do not change; ``save`` and ``load`` are collective.
    """

    def __init__(self, directory: str | os.PathLike, *, keep_last: int = 3, prefix: str = "step") -> None:
        super().__init__(directory, keep_last=keep_last, prefix=prefix)
        self._pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)$")     # a directory, not a .pt file

    def path_for(self, step: int):
        """The checkpoint directory (or prefix) for ``step``."""
        return fs.join(self.directory, f"{self.prefix}-{int(step):09d}")

    def checkpoints(self) -> list:
        """Checkpoints whose save finished (they have a manifest), oldest first."""
        steps = sorted(int(m.group(1)) for n in fs.listdir(self.directory) if (m := self._pattern.match(n)))
        paths = [self.path_for(s) for s in steps]
        return [p for p in paths if _read(fs.join(p, _MANIFEST)) is not None]

    def latest(self, *, trust: bool = False):
        """The committed checkpoint that verifies (:func:`verify`): the one ``latest.json`` names, else the
        newest older one that does (with a warning naming what was skipped and why); None on a fresh run."""
        raw = _read(fs.join(self.directory, _POINTER))
        committed = None
        if raw is not None:
            try:
                committed = int(json.loads(raw)["step"])
            except (ValueError, KeyError, TypeError):
                raise CheckpointError(f"{fs.join(self.directory, _POINTER)} is not a torchport checkpoint pointer; "
                                      "delete it to start afresh") from None
        candidates = [p for p in self.checkpoints() if committed is None or self._step_of(str(p)) <= committed]
        if committed is None and raw is None:
            candidates = []          # nothing was ever committed: a leftover half-written dir is not a checkpoint
        return newest_verified(candidates, check=functools.partial(verify, trust=trust))

    def resolve(self, resume: str | os.PathLike | None, *, trust: bool = False):
        """``None`` -> None; ``"auto"`` -> :meth:`latest`; a checkpoint directory -> it, once verified
        (``trust``: its ``.metadata`` read by torch's own reader, see :func:`verify`)."""
        if resume is None:
            return None
        if str(resume) == "auto":
            return self.latest(trust=trust)
        if not is_dcp_checkpoint(resume):
            raise CheckpointError(f"resume checkpoint {str(resume)!r} is not a sharded (DCP) checkpoint directory "
                                  "(use 'auto' for the latest one; a single-file checkpoint converts with "
                                  "`python -m torchport.train.convert SRC DST`)")
        verify(resume, trust=trust)
        return fs.location(resume)

    def save(self, *, step: int, model, optimizer=None, extra: Mapping[str, Any] | None = None):
        """Write checkpoint ``step`` from every rank, commit it (rank 0 moves ``latest.json``), prune to
        the last ``keep_last``. Collective. Returns its path."""
        from torchport.runtime import distributed as dist

        path = self.path_for(step)
        error = None
        if dist.is_main_process():
            try:
                fs.remove_tree(path)     # a half-written attempt at this step (a rank killed mid-save) goes first
            except Exception as exc:  # noqa: BLE001 - every rank must learn that rank 0 failed
                error = exc
        _agree(error, lambda: _write_fault(path, error))
        save_state(path, model=model, optimizer=optimizer, extra=extra)
        error = None
        if dist.is_main_process():
            try:
                fs.write_atomic(fs.join(self.directory, _POINTER),
                                json.dumps({"dir": fs.name(path), "step": int(step)}).encode())
            except Exception as exc:  # noqa: BLE001 - every rank must learn that rank 0 failed
                error = exc
        _agree(error, lambda: CheckpointWriteError(
            f"checkpoint {path} was written but {_POINTER} could not be moved ({_reason(error)}); the previous "
            "checkpoint stays the latest"))
        if dist.is_main_process():
            try:
                for old in self.checkpoints()[: -self.keep_last]:
                    if self._step_of(str(old)) < int(step):
                        fs.remove_tree(old)
                self._remove_uncommitted(int(step))
            except Exception as exc:  # noqa: BLE001 - committed: pruning again at the next save is enough
                import warnings

                warnings.warn(f"checkpoint {path} is committed, but older checkpoints could not be pruned "
                              f"({_reason(exc)}); the next save tries again", RuntimeWarning, stacklevel=2)
        return path

    def load(self, path, *, model, optimizer=None, amp=None, scheduler=None, rng: bool = True,
             trust: bool = False) -> dict[str, Any]:
        """Load checkpoint ``path`` (any world size) and restore the schedule, scaler and RNG; returns progress.
        ``trust``: see :func:`load_state`."""
        from torchport.runtime import checkpoint as ckpt

        extra = load_state(path, model=model, optimizer=optimizer, trust=trust)
        return ckpt.restore(extra, amp=amp, scheduler=scheduler, rng=rng)

    def _remove_uncommitted(self, committed: int) -> None:
        """Directories without a manifest (saves a crash interrupted) older than the commit are garbage."""
        for name in fs.listdir(self.directory):
            m = self._pattern.match(name)
            if m and int(m.group(1)) < committed and _read(fs.join(fs.join(self.directory, name), _MANIFEST)) is None:
                fs.remove_tree(fs.join(self.directory, name))


def convert(src: Any, dst: Any, *, model, optimizer=None, trust: bool = False) -> Any:
    """Convert a trainer checkpoint between the single-file layout (DDP / one process) and a DCP directory
    (FSDP), in one process: ``src`` is loaded into ``model`` / ``optimizer`` (freshly built, unsharded, CPU) and
    written to ``dst`` in the other layout. The direction follows ``src``: a DCP directory becomes a file.

    Returns:
        ``dst``.
    """
    from torchport.runtime import checkpoint as ckpt

    if is_dcp_checkpoint(src):
        verify(src, trust=trust)
        extra = load_state(src, model=model, optimizer=optimizer, trust=trust)
        state = {**{k: v for k, v in extra.items() if k != "integrity"},
                 **ckpt.capture(model=model, optimizer=optimizer, rng=False)}
        return ckpt.save(state, dst)
    state = ckpt.load(src, weights_only=not trust)
    ckpt.restore(state, model=model, optimizer=optimizer, rng=False)
    extra = {k: v for k, v in state.items() if k not in ("model", "optimizer", "integrity")}
    save_state(dst, model=model, optimizer=optimizer, extra=extra)
    return dst

