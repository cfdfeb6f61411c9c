"""One writer per run: a second trainer on the same run directory or checkpoint prefix refuses in one line.

* **Local directory** (the run dir, a local ``--checkpoint-dir``): an OS file lock (``filelock``) on
  ``<dir>/.torchport.lock``, held for the whole run and released by the OS if the process dies
  (no stale locks after ``kill -9``). The holder is described in ``<dir>/.torchport.owner.json``
  (pid, host, start time) so the refusal can name it.
* **Object store** (``--checkpoint-dir s3://...``): a lease object ``<prefix>/.torchport.lease.json``
  created with a conditional write (``If-None-Match: *``): of two trainers, exactly one creation
  succeeds. It is deleted when the run ends. A lease left by a process that died on *this* host is
  taken over (its pid is gone); one from another host is reported with the command to remove it.

Re-entrant within one process: calling :func:`acquire` again for a directory this process already
holds (``train()`` called twice, e.g. resume in the same interpreter) is a no-op.

Example::

    from torchport.train import lock
    lock.acquire(run_dir, checkpoint_dir)     # RunLockedError when another trainer holds either
    ...
    lock.release_all()
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from torchport.errors import ExitCode, TorchportError
from torchport.paths import is_url

__all__ = ["RunLockedError", "acquire", "release_all", "held"]

LOCK_NAME = ".torchport.lock"
OWNER_NAME = ".torchport.owner.json"
LEASE_NAME = ".torchport.lease.json"

# key (resolved local path or URL) -> ("local", FileLock) | ("store", lease URL)
_HELD: dict[str, tuple[str, Any]] = {}


class RunLockedError(TorchportError):
    """Another trainer is writing to this run directory / checkpoint prefix (exit code BUSY)."""

    exit_code = ExitCode.BUSY


def _owner() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "token": f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}"}


def _describe(owner: dict[str, Any] | None) -> str:
    if not owner:
        return "another trainer"
    return f"another trainer (pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('started')})"


def held() -> list[str]:
    """The directories / prefixes this process holds."""
    return list(_HELD)


def acquire(*dirs: Any, option: str = "--run-dir") -> None:
    """Take the writer lock on each of ``dirs`` (local directories or store prefixes), or refuse.

    Raises:
        RunLockedError: another live trainer holds one of them; nothing is left held by this call.
    """
    taken: list[str] = []
    try:
        for d in dirs:
            if d is None:
                continue
            key = str(d) if is_url(d) else str(Path(d).resolve())
            if key in _HELD or key in taken:
                continue
            _HELD[key] = _acquire_store(str(d)) if is_url(d) else _acquire_local(Path(d))
            taken.append(key)
    except BaseException:
        for key in taken:
            _release(key)
        raise


def release_all() -> None:
    """Release every lock and lease this process holds (end of the run, graceful stop)."""
    for key in list(_HELD):
        _release(key)


def _release(key: str) -> None:
    kind, obj = _HELD.pop(key, (None, None))
    if kind == "local":
        try:
            (Path(key) / OWNER_NAME).unlink(missing_ok=True)
        except OSError:
            pass
        obj.release()
    elif kind == "store":
        from torchport.errors import StorageError
        from torchport.storage import store

        try:
            store.remove(obj)
        except StorageError:
            pass   # the lease stays; the next run on this host takes it over (its pid is gone)


def _acquire_local(directory: Path) -> tuple[str, Any]:
    from filelock import FileLock, Timeout

    directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        try:
            owner = json.loads((directory / OWNER_NAME).read_text())
        except (OSError, ValueError):
            owner = None
        raise RunLockedError(f"{directory} is in use by {_describe(owner)}; wait for it to finish, stop it, or "
                             "choose another --run-dir / --checkpoint-dir") from None
    tmp = directory / f".{OWNER_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(_owner()) + "\n")
    os.replace(tmp, directory / OWNER_NAME)
    return "local", lock


def _pid_alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


def _acquire_store(prefix: str) -> tuple[str, Any]:
    """Create the lease object only if none exists (S3 conditional write); take over a dead local holder's."""
    from torchport.storage import store

    url = store.join(prefix, LEASE_NAME)
    body = json.dumps(_owner()).encode()
    for _ in range(2):
        if store.create_exclusive(url, body):
            return "store", url
        try:
            owner = json.loads(store.read_bytes(url))
        except Exception:  # noqa: BLE001 - unreadable or vanished lease: try the conditional create again
            owner = None
        if owner and owner.get("host") == socket.gethostname() and not _pid_alive(owner.get("pid")):
            store.remove(url)   # its writer died on this host without releasing it: take it over
            continue
        if owner is None:
            continue
        raise RunLockedError(f"{prefix} is in use by {_describe(owner)} (lease {url}); wait for it to finish, or "
                             f"if that trainer is gone, delete the lease (e.g. `aws s3 rm {url}`)")
    raise RunLockedError(f"{prefix}: another trainer took the lease {url} at the same moment; retry, or choose "
                         "another --checkpoint-dir")
