"""One writer per run: a second trainer on the same run directory or checkpoint prefix refuses in one line.

* **Local directory** (the run dir, a local ``--checkpoint-dir``): an OS file lock (``filelock``, an
  ``flock``) on ``<dir>/.torchport.lock``, held for the whole run and released by the OS if the
  process dies (no stale locks after ``kill -9``; forked DataLoader workers do not keep it: filelock
  closes its descriptors in a forked child). The holder is described in ``<dir>/.torchport.owner.json``
  (pid, host, start time) so the refusal can name it.
* **Object store** (``--checkpoint-dir s3://...``): a lease object ``<prefix>/.torchport.lease.json``
  created with a conditional write (``If-None-Match: *``): of two trainers, exactly one creation
  succeeds. The holder rewrites it every ``TORCHPORT_LEASE_TTL_S / 3`` seconds (default TTL 300 s)
  and deletes it when the run ends. A lease is taken over when its writer is gone: not renewed for
  longer than its TTL (the store's own timestamp says so: a crashed node, a rescheduled pod), or its
  pid is dead on this host. Otherwise the second trainer refuses, naming the holder and the command
  that removes the lease.

Re-entrant within one process: calling :func:`acquire` again for a directory this process already
holds (``train()`` called twice, e.g. resume in the same interpreter) is a no-op.

Example::

    from torchport.train import lock
    lock.acquire(run_dir, checkpoint_dir)     # RunLockedError when another trainer holds either
    ...
    lock.release_all()
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from torchport._json import write_text
from torchport._tmpfiles import pid_alive
from torchport.errors import ExitCode, TorchportError
from torchport.storage import fs

__all__ = ["RunLockedError", "acquire", "release_all"]

log = logging.getLogger("torchport.train.lock")

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


def acquire(*dirs: Any) -> None:
    """Take the writer lock on each of ``dirs`` (local directories or store prefixes), or refuse.

    Raises:
        RunLockedError: another live trainer holds one of them; nothing is left held by this call.
    """
    taken: list[str] = []
    try:
        for d in dirs:
            if d is None:
                continue
            key = fs.key(d)
            if key in _HELD or key in taken:
                continue
            _HELD[key] = _acquire_store(str(d)) if fs.remote(d) else _acquire_local(Path(d))   # lease vs flock
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
        obj.release()


def _acquire_local(directory: Path, *, lock_name: str = LOCK_NAME, owner_name: str = OWNER_NAME,
                   who: str = "another trainer", hint: str = "choose another --run-dir / --checkpoint-dir",
                   shown: Any = None) -> tuple[str, Any]:
    from filelock import FileLock, Timeout

    directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory / lock_name), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        try:
            owner = json.loads((directory / owner_name).read_text())
        except (OSError, ValueError):
            owner = None
        held_by = _describe(owner).replace("another trainer", who, 1)
        raise RunLockedError(f"{shown or directory} is in use by {held_by}; wait for it to finish, stop it, or {hint}") from None
    try:
        write_text(directory / owner_name, json.dumps(_owner()) + "\n")
    except BaseException:
        lock.release()
        raise
    return "local", lock


@contextlib.contextmanager
def output_lock(dst: Any, *, what: str = "data pack"):
    """The one-writer lock on an output ``dst`` that does not exist yet (``data pack`` writes ``DST.partial``
    then renames it): ``.<name>.torchport.lock`` beside it, the holder named in the refusal.

    Raises:
        RunLockedError: another ``what`` is writing ``dst`` (exit code BUSY).
    """
    dst = Path(dst)
    kind, lock = _acquire_local(dst.parent, lock_name=f".{dst.name}{LOCK_NAME}",
                                owner_name=f".{dst.name}{OWNER_NAME}", who=f"another {what}",
                                hint="choose another destination", shown=dst)
    try:
        yield
    finally:
        try:
            (dst.parent / f".{dst.name}{OWNER_NAME}").unlink(missing_ok=True)
        except OSError:
            pass
        lock.release()


def _lease_ttl() -> float:
    return float(os.environ.get("TORCHPORT_LEASE_TTL_S") or 300)


class _Lease:
    """A held store lease: renewed (rewritten) every ttl/3 by a daemon thread until released."""

    def __init__(self, url: str, owner: dict[str, Any]) -> None:
        self.url, self.owner, self.stop = url, owner, threading.Event()
        self.thread = threading.Thread(target=self._renew, name="torchport-lease", daemon=True)
        self.thread.start()

    def _renew(self) -> None:
        from torchport.storage import store

        while not self.stop.wait(_lease_ttl() / 3):
            try:
                current = json.loads(store.read_bytes(self.url))
                if current.get("token") != self.owner["token"]:
                    log.warning("the lease %s was taken over by %s; this run is no longer the only writer",
                                self.url, _describe(current))
                    return
                store.write_bytes(self.url, json.dumps(self.owner).encode())   # a fresh LastModified
            except Exception as exc:  # noqa: BLE001 - a failed renewal is retried at the next tick
                log.warning("could not renew the lease %s: %s", self.url, exc)

    def release(self) -> None:
        from torchport.errors import StorageError
        from torchport.storage import store

        self.stop.set()
        try:
            current = json.loads(store.read_bytes(self.url))
            if current.get("token") == self.owner["token"]:
                store.remove(self.url)
        except (StorageError, ValueError):
            pass   # gone already, or unreadable: a later run takes an expired lease over


def _stale(url: str, owner: dict[str, Any]) -> str | None:
    """Why the lease's writer is gone (None: it may be alive): dead pid on this host, or not renewed."""
    from torchport.storage import store

    if owner.get("host") == socket.gethostname():
        pid = owner.get("pid")
        ours = any(kind == "store" and obj.owner.get("token") == owner.get("token") for kind, obj in _HELD.values())
        if (pid == os.getpid() and not ours) or not pid_alive(pid):   # our pid, not our lease: a restarted container
            return f"its writer (pid {pid}) is gone"
    meta = store.info(url) or {}
    modified = meta.get("LastModified")
    ttl = float(owner.get("ttl_s") or _lease_ttl())
    if modified is not None and time.time() - modified.timestamp() > ttl:
        return f"not renewed for more than {ttl:g} s"
    return None


def _acquire_store(prefix: str) -> tuple[str, Any]:
    """Create the lease object only if none exists (S3 conditional write); take over a stale one."""
    from torchport.storage import store

    url = store.join(prefix, LEASE_NAME)
    owner = {**_owner(), "ttl_s": _lease_ttl()}
    for _ in range(3):
        if store.create_exclusive(url, json.dumps(owner).encode()):
            return "store", _Lease(url, owner)
        try:
            current = json.loads(store.read_bytes(url))
        except Exception:  # noqa: BLE001 - unreadable or vanished lease: try the conditional create again
            continue
        why = _stale(url, current)
        if why is not None:
            log.warning("taking over the lease %s of %s: %s", url, _describe(current), why)
            store.remove(url)   # of several takers only one conditional create succeeds
            continue
        raise RunLockedError(f"{prefix} is in use by {_describe(current)} (lease {url}, renewed every "
                             f"{float(current.get('ttl_s') or _lease_ttl()) / 3:g} s); wait for it to finish, or if "
                             f"that trainer is gone, delete the lease (e.g. `aws s3 rm {url}`)")
    raise RunLockedError(f"{prefix}: another trainer took the lease {url} at the same moment; retry, or choose "
                         "another --checkpoint-dir")
