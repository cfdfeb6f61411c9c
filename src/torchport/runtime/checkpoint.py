"""Portable, crash-safe checkpoints for any training code.

Three promises:

* **Portable** -- every tensor is saved on CPU, loading uses ``weights_only=True`` and
  ``map_location="cpu"``; the optimizer moves its state to the parameters' device when loaded.
  A checkpoint written on an (emulated) NPU resumes on CPU or a GPU and vice versa. The
  GradScaler state is normalised across torch and vendor scalers (the ``dynamic`` key).
* **Complete** -- model, optimizer, scaler, LR scheduler, progress (epoch / step / sampler
  position), every RNG (python, numpy as a tensor, torch, per device type), config and versions:
  enough to continue bit-identically on the same platform.
* **Atomic** -- written to a temp file in the same directory, flushed, fsync'ed, then renamed over
  the final name; a crash or a full disk leaves the previous checkpoint intact. A manager keeps
  the last K.

Example::

    from torchport.runtime import checkpoint as ckpt

    manager = ckpt.CheckpointManager("runs/exp1/checkpoints", keep_last=3)
    path = manager.latest()                                    # None on a fresh run
    if path:
        progress = ckpt.restore(ckpt.load(path), model=model, optimizer=opt, amp=amp, scheduler=sched)
    ...
    state = ckpt.capture(model=model, optimizer=opt, amp=amp, scheduler=sched,
                         progress={"epoch": epoch, "step": step}, config=cfg_dict)
    manager.save(state, step=step)

Test hook: ``TORCHPORT_CHECKPOINT_TEST_DELAY_S`` sleeps that long between the fsync of the temp
file and the rename (lets tests SIGKILL a process in the middle of a save).
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, Mapping

from torchport.storage import fs as storage_fs

__all__ = [
    "FORMAT",
    "CheckpointError",
    "CheckpointWriteError",
    "CheckpointManager",
    "save",
    "load",
    "capture",
    "restore",
    "to_cpu",
    "unwrap_model",
    "versions",
    "CheckpointIntegrityError",
    "CheckpointRefusedError",
    "state_digest",
    "with_integrity",
    "verify",
    "verify_file",
    "newest_verified",
    "describe_refusal",
]

#: Format tag stored in every checkpoint (bump on incompatible layout changes).
FORMAT = "torchport.checkpoint/1"
_TMP_MARK = ".tmp-"

from torchport.errors import ExitCode  # noqa: E402


class CheckpointError(RuntimeError):
    """A checkpoint could not be read or does not match what it is loaded into."""

    exit_code = ExitCode.CHECKPOINT


class CheckpointWriteError(CheckpointError):
    """Writing failed (disk full, permissions...); the previous checkpoint is untouched."""


class CheckpointRefusedError(CheckpointError):
    """The file holds objects that could run code when unpickled; refused on purpose."""


class CheckpointIntegrityError(CheckpointError):
    """The checkpoint reads but its content differs from what was saved (checksum mismatch)."""


# -- tensors ------------------------------------------------------------------------------------------
def to_cpu(obj: Any) -> Any:
    """Return ``obj`` with every tensor detached and moved to CPU (dicts, lists, tuples walked)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        items = [(k, to_cpu(v)) for k, v in obj.items()]
        try:
            return type(obj)(items)  # keeps OrderedDict (state dicts)
        except TypeError:
            return dict(items)
    if isinstance(obj, list):
        return [to_cpu(v) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(to_cpu(v) for v in obj)
    return obj


def unwrap_model(model: Any) -> Any:
    """The plain module inside DDP / DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``),
    so state-dict keys do not depend on how the model was wrapped."""
    while True:
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if inner is None or inner is model:
            return model
        model = inner


def versions() -> dict[str, str]:
    """Library versions and the device that wrote the checkpoint (for bug reports and warnings)."""
    import torch

    import torchport

    # str(): torch.__version__ is a TorchVersion object, which weights_only loading refuses.
    out = {"torch": str(torch.__version__), "torchport": str(torchport.__version__), "python": platform.python_version()}
    with contextlib.suppress(Exception):
        import torchvision

        out["torchvision"] = str(torchvision.__version__)
    import sys

    from torchport import backends

    for spec in backends.specs():  # out-of-tree backend plugins that are loaded in this process
        if spec.plugin and spec.plugin in sys.modules:
            out[spec.plugin] = str(getattr(sys.modules[spec.plugin], "__version__", "?"))
    with contextlib.suppress(Exception):
        from torchport.runtime.device import current

        out["device"] = str(current())
    return out


# -- capture / restore ------------------------------------------------------------------------------------
def capture(
    *,
    model: Any = None,
    optimizer: Any = None,
    amp: Any = None,
    scaler: Any = None,
    scheduler: Any = None,
    progress: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    rng: bool = True,
) -> dict[str, Any]:
    """Collect a complete training state as a CPU-only dict, ready for :func:`save`.

    Args:
        model: the module (DDP / compile wrappers are unwrapped, so keys stay portable).
        optimizer: its ``state_dict`` is saved.
        amp: a :class:`torchport.Amp` (its normalised scaler state is saved), or
        scaler: a raw ``GradScaler`` (its state is normalised the same way).
        scheduler: an LR scheduler.
        progress: counters such as ``{"epoch": 3, "step": 1200, "batches_done_in_epoch": 40}``.
        config: the run's configuration as plain data.
        extra: anything else (plain data and tensors).
        rng: include every RNG state (:func:`torchport.runtime.seed.rng_state`).

    Returns:
        ``{"format", "versions", "model", "optimizer", "scaler", "scheduler", "progress", "rng",
        "config", "extra"}`` with only the parts given.
    """
    state: dict[str, Any] = {"format": FORMAT, "versions": versions()}
    if model is not None:
        state["model"] = unwrap_model(model).state_dict()
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
        state["optimizer_type"] = type(optimizer).__name__   # so a resume with another optimizer is refused
    if amp is not None:
        state["scaler"] = amp.state_dict()
    elif scaler is not None:
        state["scaler"] = _normalise_scaler_state(scaler.state_dict(), dynamic=getattr(scaler, "_dynamic", True))
    if scheduler is not None:
        state["scheduler"] = scheduler.state_dict()
    if progress is not None:
        state["progress"] = dict(progress)
    if config is not None:
        from torchport.redact import redact_obj

        # redacted like every other output: a checkpoint is shared; nothing reads the endpoint's credentials
        # back from it (resume takes them from the command line / environment, convert only the model keys)
        state["config"] = redact_obj(dict(config))
    if extra is not None:
        state["extra"] = dict(extra)
    if rng:
        from torchport.runtime.seed import rng_state

        state["rng"] = rng_state()
    return to_cpu(state)


def restore(
    state: Mapping[str, Any],
    *,
    model: Any = None,
    optimizer: Any = None,
    amp: Any = None,
    scaler: Any = None,
    scheduler: Any = None,
    rng: bool = True,
    strict: bool = True,
    source: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Load a :func:`capture` dict into live objects on the current device.

    Model weights are copied into the existing (device) parameters; the optimizer moves its
    state to each parameter's device; RNG states for device types absent here are skipped
    (so an NPU checkpoint resumes on CPU).

    Returns:
        The ``progress`` dict (empty when the checkpoint has none).

    Args:
        source: where ``state`` was read from; named in every error message.

    Raises:
        CheckpointError: an object was passed but the checkpoint has no state for it, the model
            keys or shapes do not match (``strict``; the message lists them), or the optimizer is
            of another kind than the one that wrote the checkpoint.
    """
    name = f"checkpoint {source}" if source is not None else "checkpoint"
    fix = "resume with the settings the checkpoint was written with (model, classes, optimizer), or start a new run"

    def part(key: str) -> Any:
        if key not in state:
            raise CheckpointError(f"{name} has no {key!r} state (it has: {', '.join(sorted(state))})")
        return state[key]

    if model is not None:
        target = unwrap_model(model)
        if strict:
            _check_model_fits(target, part("model"), name, fix)
        try:
            target.load_state_dict(part("model"), strict=strict)
        except RuntimeError as exc:
            first = " ".join(str(exc).split())
            raise CheckpointError(f"{name}: model weights do not fit {type(target).__name__}: {first[:300]}; {fix}") from None
    if optimizer is not None:
        _load_optimizer(optimizer, part("optimizer"), state.get("optimizer_type"), name, fix)
    if amp is not None:
        amp.load_state_dict(state.get("scaler") or {})
    elif scaler is not None and state.get("scaler"):
        from torchport.runtime.amp import load_scaler_state

        load_scaler_state(scaler, state["scaler"])
    if scheduler is not None:
        scheduler.load_state_dict(part("scheduler"))
    if rng and "rng" in state:
        from torchport.runtime.seed import set_rng_state

        set_rng_state(state["rng"])
    return dict(state.get("progress") or {})


def _check_model_fits(model: Any, saved: Mapping[str, Any], name: str, fix: str) -> None:
    """Raise CheckpointError listing missing / unexpected keys and shape mismatches (a few of each)."""
    mine = model.state_dict()
    missing = [k for k in mine if k not in saved]
    unexpected = [k for k in saved if k not in mine]
    shapes = [f"{k} {tuple(saved[k].shape)} in the checkpoint vs {tuple(v.shape)} here" for k, v in mine.items()
              if k in saved and hasattr(saved[k], "shape") and hasattr(v, "shape") and tuple(saved[k].shape) != tuple(v.shape)]
    parts = [f"{len(keys)} {what} ({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''})"
             for what, keys in (("shape mismatch(es)", shapes), ("key(s) missing from the checkpoint", missing),
                                ("unexpected key(s)", unexpected)) if keys]
    if parts:
        raise CheckpointError(f"{name}: model weights do not fit this {type(model).__name__}: {'; '.join(parts)}; {fix}")


def _load_optimizer(optimizer: Any, saved: Mapping[str, Any], saved_type: str | None, name: str, fix: str) -> None:
    """``optimizer.load_state_dict(saved)``, refusing a state written by another kind of optimizer (which
    would load silently and fail at the first step with a KeyError such as ``'momentum'``)."""
    mine = type(optimizer).__name__
    if saved_type is not None and saved_type != mine:
        raise CheckpointError(f"{name} holds {saved_type} optimizer state but this run uses {mine}; {fix}")
    groups = saved.get("param_groups") if isinstance(saved, Mapping) else None
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise CheckpointError(f"{name}: its optimizer state has {len(groups) if isinstance(groups, list) else 'no'} "
                              f"parameter group(s), this {mine} has {len(optimizer.param_groups)}; {fix}")
    try:
        optimizer.load_state_dict(saved)
    except (ValueError, KeyError, RuntimeError) as exc:
        raise CheckpointError(f"{name}: optimizer state does not fit this {mine}: {exc}; {fix}") from None
    # A state from another optimizer kind (older checkpoints do not record it) lacks this one's hyperparameters;
    # version-added keys were filled in by the optimizer's __setstate__ during the load.
    absent = sorted({k for g in optimizer.param_groups for k in optimizer.defaults if k not in g})
    if absent:
        raise CheckpointError(f"{name}: optimizer state lacks {mine}'s setting(s) {', '.join(absent)} "
                              f"(written by another optimizer?); {fix}")


def _normalise_scaler_state(s: Mapping[str, Any], *, dynamic: bool) -> dict[str, Any]:
    out = dict(s)
    out.setdefault("dynamic", bool(dynamic))
    return out


# -- files -----------------------------------------------------------------------------------------------
def save(state: Mapping[str, Any], path: str | os.PathLike, *, fsync: bool = True) -> Path:
    """Write ``state`` to ``path`` atomically (temp file + fsync + rename); tensors go to CPU first.

    Returns:
        The final path.

    Raises:
        CheckpointWriteError: the write failed; ``path`` (if it existed) is unchanged and the temp
            file is removed.
    """
    import torch

    if storage_fs.remote(path):
        return _save_remote(state, str(path))
    final = Path(path)
    try:
        payload = with_integrity(to_cpu(dict(state)))
        with atomic_file(final, fsync=fsync) as fh:
            torch.save(payload, fh)
            delay = os.environ.get("TORCHPORT_CHECKPOINT_TEST_DELAY_S")
            if delay:  # test hook: widen the window between "temp written" and "renamed"
                fh.flush()
                time.sleep(float(delay))
    except (OSError, RuntimeError) as exc:
        raise CheckpointWriteError(
            f"writing checkpoint {final} failed ({type(exc).__name__}: {exc}); nothing was replaced, "
            "earlier checkpoints are intact. Free disk space or choose another directory."
        ) from exc
    return final


@contextlib.contextmanager
def atomic_file(final: Path, *, fsync: bool = True):
    """Yield a binary file handle whose bytes replace ``final`` only when the block ends without error.

    A temp file beside ``final`` (parents created), flushed and fsync'ed, renamed over it, then the
    directory fsync'ed; on any error the temp file is removed and ``final`` is untouched.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}{_TMP_MARK}{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        if fsync:
            _fsync_dir(final.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load(path: str | os.PathLike, *, map_location: Any = "cpu", weights_only: bool = True) -> dict[str, Any]:
    """Read a checkpoint safely: ``weights_only=True`` (no arbitrary code) onto CPU.

    Raises:
        CheckpointError: missing, truncated or not-a-checkpoint file (the message names it).
    """
    import torch

    if storage_fs.remote(path):
        return _load_remote(str(path), map_location=map_location, weights_only=weights_only)
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {str(p)!r} does not exist")
    state = safe_torch_load(p, map_location=map_location, trust=not weights_only)
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {str(p)!r} holds a {type(state).__name__}, not a dict")
    verify(state, p)
    return state


# -- object storage (s3:// and obs://): S3 has no rename, so the object is written whole (one PUT, or a
# multipart upload that only appears once complete) and a small "latest" pointer written afterwards is
# the commit. Everything remote goes through torchport.storage.store.
_POINTER = "latest.json"


def _staging_file(name: str) -> Path:
    """A local temp file for one object-store transfer, ``.torchport-staging-<pid>-<random>-<name>``; staging
    files of processes killed mid-upload are removed first (:mod:`torchport._tmpfiles`)."""
    from torchport._tmpfiles import mkstemp_owned

    return mkstemp_owned(".torchport-staging-", os.environ.get("TORCHPORT_STORAGE_STAGING"), suffix=f"-{name}")


def _save_remote(state: Mapping[str, Any], url: str) -> str:
    """Serialise to a local temp file, upload it as ``url``; the object appears only when complete."""
    import torch

    from torchport.errors import StorageError
    from torchport.storage import store

    tmp = _staging_file(store.basename(url))
    try:
        with open(tmp, "wb") as fh:
            torch.save(with_integrity(to_cpu(dict(state))), fh)  # the same checksum as a local save
        store.put_file(tmp, url)
    except (OSError, RuntimeError, StorageError) as exc:
        raise CheckpointWriteError(f"writing checkpoint {url} failed ({exc}); the latest pointer was not moved, "
                                   "earlier checkpoints are intact") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return url


def _load_remote(url: str, *, map_location: Any, weights_only: bool) -> dict[str, Any]:
    from torchport.errors import StorageError
    from torchport.storage import store

    tmp = _staging_file(store.basename(url))
    try:
        try:
            if not store.exists(url):
                raise CheckpointError(f"checkpoint {url!r} does not exist")
            store.get_file(url, tmp)
        except StorageError as exc:
            raise CheckpointError(f"checkpoint {url!r} could not be downloaded: {exc}") from None
        try:
            return load(tmp, map_location=map_location, weights_only=weights_only)
        except CheckpointError as exc:
            raise CheckpointError(str(exc).replace(str(tmp), url)) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


class CheckpointManager:
    """A directory of step-numbered checkpoints ``<prefix>-<step>.pt`` with keep-last-K.

    Args:
        directory: where checkpoints live (created on first save).
        keep_last: how many to keep; older ones are deleted only after a new one is safely written.
        prefix: file name prefix.

    Example::

        m = CheckpointManager("runs/a/checkpoints", keep_last=2)
        m.save(state, step=100)       # runs/a/checkpoints/ckpt-000000100.pt
        m.latest()                    # Path of the highest step that is a complete file
    """

    def __init__(self, directory: str | os.PathLike, *, keep_last: int = 3, prefix: str = "ckpt") -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last={keep_last} must be >= 1")
        #: an s3:// / obs:// URL: checkpoints are objects and ``latest.json`` is the commit pointer
        self.remote = storage_fs.remote(directory)
        self.directory = str(directory).rstrip("/") if self.remote else Path(directory)
        self.keep_last = keep_last
        self.prefix = prefix
        self._pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)\.pt$")

    def path_for(self, step: int) -> Path:
        """File name for ``step``."""
        name = f"{self.prefix}-{int(step):09d}.pt"
        return f"{self.directory}/{name}" if self.remote else self.directory / name

    def checkpoints(self) -> list[Path]:
        """Complete checkpoint files, oldest (lowest step) first; temp files are never listed."""
        if self.remote:
            return self._remote_checkpoints()
        if not self.directory.is_dir():
            return []
        found = []
        for p in self.directory.iterdir():
            m = self._pattern.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), p))
        return [p for _, p in sorted(found)]

    def latest(self, *, trust: bool = False) -> Path | None:
        """The newest checkpoint that reads and verifies (:func:`verify_file`), or None.

        Newer ones that fail (truncated, damaged, checksum mismatch, refused content) are skipped with a
        warning that names each one and the checkpoint used instead. In an object store: the one the
        ``latest.json`` pointer names (the pointer moves only after the object is complete)."""
        if self.remote:
            return self._remote_latest()
        return newest_verified(self.checkpoints(), check=functools.partial(verify_file, trust=trust))

    def resolve(self, resume: str | os.PathLike | None, *, trust: bool = False) -> Path | None:
        """``None`` -> None; ``"auto"`` -> :meth:`latest` (None on a fresh run); a path -> that path.
        ``trust`` (``--trust-checkpoint``): candidates are verified with torch's full unpickler."""
        if resume is None:
            return None
        if str(resume) == "auto":
            return self.latest(trust=trust)
        if storage_fs.remote(resume):
            from torchport.storage import store

            if not store.exists(str(resume)):
                raise CheckpointError(f"resume checkpoint {str(resume)!r} does not exist (use 'auto' for the latest one)")
            return str(resume)
        p = Path(resume)
        if not p.is_file():
            raise CheckpointError(f"resume checkpoint {str(p)!r} does not exist (use 'auto' for the latest one)")
        return p

    def save(self, state: Mapping[str, Any], *, step: int) -> Path:
        """Atomically write ``state`` as step ``step``, then prune to the last ``keep_last``."""
        if self.remote:
            return self._remote_save(state, step)
        self._remove_stale_temp_files()
        path = save(state, self.path_for(step))
        for old in self.checkpoints()[: -self.keep_last]:
            if old != path:
                with contextlib.suppress(OSError):
                    old.unlink()
        return path

    def _remove_stale_temp_files(self) -> None:
        """Temp files left by a process killed mid-save are garbage (their rename never happened)."""
        if not self.directory.is_dir():
            return
        for p in self.directory.iterdir():
            if p.name.startswith(f".{self.prefix}-") and _TMP_MARK in p.name:
                with contextlib.suppress(OSError):
                    p.unlink()

    # -- object storage ------------------------------------------------------------------------------------
    def _remote_checkpoints(self) -> list[str]:
        from torchport.storage import store

        found = [(int(m.group(1)), n) for n in store.listdir(self.directory) if (m := self._pattern.match(n))]
        return [f"{self.directory}/{n}" for _, n in sorted(found)]

    def _remote_latest(self) -> str | None:
        import json

        from torchport.storage import store

        pointer = f"{self.directory}/{_POINTER}"
        raw = storage_fs.read_bytes(pointer, missing_ok=True)
        if raw is None:
            return None
        try:
            name = json.loads(raw)["file"]
        except (ValueError, KeyError, TypeError):
            raise CheckpointError(f"{pointer} is not a torchport checkpoint pointer; delete it to start afresh") from None
        url = f"{self.directory}/{name}"
        if not store.exists(url):
            raise CheckpointError(f"{pointer} names {url}, which does not exist; restore it or pass --resume URL")
        return url

    def _remote_save(self, state: Mapping[str, Any], step: int) -> str:
        import json

        from torchport.errors import StorageError
        from torchport.storage import store

        url = save(state, self.path_for(step))  # complete object first ...
        delay = os.environ.get("TORCHPORT_CHECKPOINT_TEST_DELAY_S")
        if delay:  # test hook: the window between "object uploaded" and "pointer moved"
            time.sleep(float(delay))
        name = url.rsplit("/", 1)[-1]
        try:  # ... then the pointer: the commit
            store.write_bytes(f"{self.directory}/{_POINTER}", json.dumps({"file": name, "step": int(step)}).encode())
        except StorageError as exc:
            raise CheckpointWriteError(f"checkpoint {url} was uploaded but the latest pointer could not be moved ({exc}); "
                                       "the previous checkpoint stays the latest") from exc
        older = [u for u in self._remote_checkpoints() if self._step_of(u) <= int(step)]
        for old in older[: -self.keep_last]:
            with contextlib.suppress(StorageError):
                store.remove(old)
        return url

    def _step_of(self, url: str) -> int:
        m = self._pattern.match(url.rsplit("/", 1)[-1])
        return int(m.group(1)) if m else -1

# -- integrity ------------------------------------------------------------------------------------------
# Every checkpoint carries ``state["integrity"] = {"algorithm": "sha256", "digest": HEX}``: a digest of the
# payload (every key, plain value and tensor -- dtype, shape and bytes -- in order), computed before
# ``torch.save`` and checked after ``torch.load``. It is plain strings, so the file stays a portable
# ``weights_only`` checkpoint that any torch reads. A flipped byte in a tensor, a changed value or a
# truncated list fails the check; damage to the zip structure already fails the load.
_INTEGRITY_KEY = "integrity"


def _feed(h, obj: Any) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, Mapping):
        h.update(f"D{len(obj)}".encode())
        for k, v in obj.items():
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{'L' if isinstance(obj, list) else 'U'}{len(obj)}".encode())
        for v in obj:
            _feed(h, v)
    elif isinstance(obj, (bytes, bytearray)):
        h.update(b"B%d" % len(obj))
        h.update(bytes(obj))
    else:  # str, int, float, bool, None, torch.dtype / torch.Size / device ...: repr is exact and stable
        text = repr(obj).encode()
        h.update(f"{type(obj).__name__}:{len(text)}:".encode())
        h.update(text)


def state_digest(state: Mapping[str, Any]) -> str:
    """sha256 (hex) of a checkpoint payload, the ``integrity`` record itself excluded."""
    import hashlib

    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != _INTEGRITY_KEY})
    return h.hexdigest()


def with_integrity(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` plus its integrity record (what :func:`save` writes)."""
    out = {k: v for k, v in state.items() if k != _INTEGRITY_KEY}
    out[_INTEGRITY_KEY] = {"algorithm": "sha256", "digest": state_digest(out)}
    return out


def verify(state: Mapping[str, Any], path: str | os.PathLike = "<checkpoint>") -> bool:
    """Check a loaded payload against its integrity record.

    Returns:
        True when verified, False when the checkpoint has no record (written before torchport stored one).

    Raises:
        CheckpointIntegrityError: the digest differs: the file was damaged or edited after it was written.
    """
    record = state.get(_INTEGRITY_KEY)
    if record is None:
        return False
    want = record.get("digest") if isinstance(record, Mapping) else None
    if not want or record.get("algorithm") != "sha256" or state_digest(state) != want:
        raise CheckpointIntegrityError(
            f"checkpoint {str(path)!r} fails its checksum: its content changed after it was written "
            "(disk or copy damage, or an edit); use an earlier checkpoint (--resume auto picks the newest good one)")
    return True


def verify_file(path: str | os.PathLike, *, trust: bool = False) -> None:
    """Load and verify the checkpoint at ``path``; raises :class:`CheckpointError` (with the reason) when it fails.
    ``trust``: load with ``weights_only=False`` (a file you made yourself; ``--trust-checkpoint``)."""
    try:
        load(path, weights_only=not trust)
    except (CheckpointIntegrityError, CheckpointRefusedError):
        raise
    except CheckpointError:
        if zipfile.is_zipfile(path):
            raise
        raise CheckpointError(f"checkpoint {str(path)!r} is incomplete (not a complete torch.save archive)") from None


def newest_verified(paths: list[Path], *, check: Any = None) -> Path | None:
    """The last of ``paths`` (oldest first) that passes ``check`` (default :func:`verify_file`); each newer one
    that fails is named in a warning, with the reason and the checkpoint used instead."""
    failed: list[str] = []
    for p in reversed(paths):
        try:
            (check or verify_file)(p)
        except CheckpointError as exc:
            failed.append(f"{str(p).rstrip('/').rsplit('/', 1)[-1]}: {exc}")
            continue
        if failed:
            warnings.warn(f"falling back to checkpoint {p} (the newest that verifies); skipped "
                          + "; ".join(failed), RuntimeWarning, stacklevel=3)
        return p
    if failed:
        warnings.warn("no checkpoint verifies; skipped " + "; ".join(failed), RuntimeWarning, stacklevel=3)
    return None


def refusal_line(name: Any, what: str) -> str:
    """The one line for a refused checkpoint file: names it and what it holds -- never torch's advice to retry
    with ``weights_only=False`` (that would run the file's code)."""
    return (f"checkpoint {str(name)!r} was refused on purpose: it {what}, which could run code on this machine; "
            "torchport loads only tensors and plain data")


def safe_torch_load(f: Any, *, name: Any = None, map_location: Any = "cpu", trust: bool = False) -> Any:
    """``torch.load(f, weights_only=True)`` with torchport's errors: the one place a torch file from elsewhere
    is unpickled (checkpoints, DCP items, parity seeds). ``trust`` (``--trust-checkpoint``) loads any pickle.

    Raises:
        CheckpointRefusedError: the file holds something that could run code (nothing ran), or is in the
            legacy ``.tar`` format (unreadable without running its pickle);
        CheckpointError: unreadable, truncated, not a torch file.
    """
    import torch

    name = f if name is None else name
    if trust:
        return torch.load(f, map_location=map_location, weights_only=False)  # torchport: trusted (opt-in)
    try:
        return torch.load(f, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - every failure of a file from elsewhere is one line
        text = str(exc)
        if "legacy .tar format" in text:
            raise CheckpointRefusedError(refusal_line(name, "is in torch's legacy .tar format (readable only "
                                                      "by running its pickle)")) from None
        refused = describe_refusal(exc, f if isinstance(f, (str, os.PathLike)) else None)
        if refused is not None:
            raise CheckpointRefusedError(refusal_line(name, refused)) from None
        lines = [ln.strip() for ln in text.split("WeightsUnpickler error:")[-1].splitlines() if ln.strip()]
        first = next((ln for ln in lines if "weights_only" not in ln and "Please file an issue" not in ln), "")
        raise CheckpointError(f"checkpoint {str(name)!r} could not be read ({type(exc).__name__}: {first[:200]}); "
                              "is it a complete torch.save file?") from None


def describe_refusal(exc: BaseException, path: str | os.PathLike | None = None) -> str | None:
    """What ``torch.load(weights_only=True)`` refused, in words (``holds the blocked global posix.system``),
    or None when ``exc`` is not such a refusal. torch's own text hides the name under advice to retry
    with ``weights_only=False``, which a hostile file must never get. For a legacy (non-zip) pickle,
    whose error names no global, the pickle's opcodes are listed (never executed) to find it."""
    text = str(exc)
    m = re.search(r"GLOBAL ([\w.]+)", text)
    if m:
        return f"holds the blocked global {m.group(1)}"
    m = re.search(r"([Uu]nsupported class [\w.]+|Trying to call reduce for unrecognized function [^\s]+)", text)
    if m:
        return f"holds an object torchport does not load ({m.group(1)})"
    if path is not None and "Weights only load failed" in text:
        names = [n for n in _pickle_globals(path) if not n.startswith(("torch.", "collections.OrderedDict"))]
        if names:
            return f"holds the blocked global {names[0]}"
    return None


def _pickle_globals(path: str | os.PathLike, limit: int = 1 << 20) -> list[str]:
    """``module.name`` of every global a raw pickle file imports (read with pickletools: nothing runs)."""
    import pickletools

    try:
        with open(path, "rb") as fh:
            data = fh.read(limit)
    except OSError:
        return []
    names: list[str] = []
    strings: list[str] = []
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "SHORT_BINSTRING",
                           "BINSTRING", "STRING"):
                strings.append(str(arg))
            elif op.name == "GLOBAL" and isinstance(arg, str):
                names.append(arg.replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                names.append(f"{strings[-2]}.{strings[-1]}")
    except Exception:  # noqa: BLE001 - truncated or not a pickle: report what was found so far
        pass
    return names
