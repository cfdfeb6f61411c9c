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
import os
import platform
import re
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, Mapping

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
    if amp is not None:
        state["scaler"] = amp.state_dict()
    elif scaler is not None:
        state["scaler"] = _normalise_scaler_state(scaler.state_dict(), dynamic=getattr(scaler, "_dynamic", True))
    if scheduler is not None:
        state["scheduler"] = scheduler.state_dict()
    if progress is not None:
        state["progress"] = dict(progress)
    if config is not None:
        state["config"] = dict(config)
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
) -> dict[str, Any]:
    """Load a :func:`capture` dict into live objects on the current device.

    Model weights are copied into the existing (device) parameters; the optimizer moves its
    state to each parameter's device; RNG states for device types absent here are skipped
    (so an NPU checkpoint resumes on CPU).

    Returns:
        The ``progress`` dict (empty when the checkpoint has none).

    Raises:
        CheckpointError: an object was passed but the checkpoint has no state for it, or the
            model keys do not match (``strict``).
    """

    def part(key: str) -> Any:
        if key not in state:
            raise CheckpointError(f"checkpoint has no {key!r} state (it has: {', '.join(sorted(state))})")
        return state[key]

    if model is not None:
        try:
            unwrap_model(model).load_state_dict(part("model"), strict=strict)
        except RuntimeError as exc:
            raise CheckpointError(f"checkpoint model weights do not fit this model: {exc}") from None
    if optimizer is not None:
        optimizer.load_state_dict(part("optimizer"))
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

    if _is_url(path):
        return _save_remote(state, str(path))
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}{_TMP_MARK}{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            torch.save(to_cpu(dict(state)), fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        delay = os.environ.get("TORCHPORT_CHECKPOINT_TEST_DELAY_S")
        if delay:  # test hook: widen the window between "temp written" and "renamed"
            time.sleep(float(delay))
        os.replace(tmp, final)
        if fsync:
            _fsync_dir(final.parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, (OSError, RuntimeError)):
            raise CheckpointWriteError(
                f"writing checkpoint {final} failed ({type(exc).__name__}: {exc}); nothing was replaced, "
                "earlier checkpoints are intact. Free disk space or choose another directory."
            ) from exc
        raise
    return final


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

    if _is_url(path):
        return _load_remote(str(path), map_location=map_location, weights_only=weights_only)
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {str(p)!r} does not exist")
    try:
        state = torch.load(p, map_location=map_location, weights_only=weights_only)
    except Exception as exc:
        text = str(exc)
        refused = next((ln.strip() for ln in text.splitlines() if "Unsupported global" in ln), None)
        if refused:
            raise CheckpointError(f"checkpoint {str(p)!r} holds an object weights_only=True refuses ({refused}); "
                                  "if you trust the file, load it with weights_only=False") from None
        first = text.splitlines()[0] if text else ""
        raise CheckpointError(f"checkpoint {str(p)!r} could not be read ({type(exc).__name__}: {first}); "
                              "is it a complete torch.save file?") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {str(p)!r} holds a {type(state).__name__}, not a dict")
    return state


# -- object storage (s3:// and obs://): S3 has no rename, so the object is written whole (one PUT, or a
# multipart upload that only appears once complete) and a small "latest" pointer written afterwards is
# the commit. Everything remote goes through torchport.storage.store.
_POINTER = "latest.json"


def _is_url(path: Any) -> bool:
    from torchport.storage.store import is_url

    return is_url(path)


def _staging_file(name: str) -> Path:
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{name}{_TMP_MARK}", dir=os.environ.get("TORCHPORT_STORAGE_STAGING"))
    os.close(fd)
    return Path(tmp)


def _save_remote(state: Mapping[str, Any], url: str) -> str:
    """Serialise to a local temp file, upload it as ``url``; the object appears only when complete."""
    import torch

    from torchport.errors import StorageError
    from torchport.storage import store

    tmp = _staging_file(store.basename(url))
    try:
        with open(tmp, "wb") as fh:
            torch.save(to_cpu(dict(state)), fh)
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
        self.remote = _is_url(directory)
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

    def latest(self) -> Path | None:
        """The newest checkpoint that is a structurally complete file (truncated ones are skipped
        with a warning), or None. In an object store: the one the ``latest.json`` pointer names."""
        if self.remote:
            return self._remote_latest()
        for p in reversed(self.checkpoints()):
            if zipfile.is_zipfile(p):
                return p
            warnings.warn(f"skipping incomplete checkpoint {p}", RuntimeWarning, stacklevel=2)
        return None

    def resolve(self, resume: str | os.PathLike | None) -> Path | None:
        """``None`` -> None; ``"auto"`` -> :meth:`latest` (None on a fresh run); a path -> that path."""
        if resume is None:
            return None
        if str(resume) == "auto":
            return self.latest()
        if _is_url(resume):
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
        fs, p = store._path(pointer)
        raw = store.call(lambda: fs.cat_file(p), pointer, what="read", missing_ok=True)
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
