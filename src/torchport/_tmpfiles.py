"""Temp files and folders that outlive a killed process, and how the next process removes them.

SIGKILL, the OOM killer and a segfault run no ``finally`` and no ``atexit``: a temp file or folder made by
such a process stays for good (a checkpoint-sized upload staging file, ``torchport run``'s report folder).
So every such name carries its owner's pid -- ``<prefix><pid>-<random>`` -- and making a new one first
removes those whose owner no longer exists. Leaks are bounded to one per killed process, until the next run.

Example::

    path = mkstemp_owned(".torchport-staging-", suffix="-ckpt-4.pt")  # /tmp/.torchport-staging-12345-k2j3-ckpt-4.pt
    folder = mkdtemp_owned("torchport-run-")        # /tmp/torchport-run-12345-ab12cd
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = ["mkstemp_owned", "mkdtemp_owned", "pid_alive", "sweep_dead"]


def pid_alive(pid: object) -> bool:
    """Whether process ``pid`` (this machine's) still runs; a value that is not a pid is not alive."""
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except (PermissionError, OverflowError):   # another user's live process (or a pid out of range: keep)
        return True
    return True


def sweep_dead(folder: str | os.PathLike, prefix: str) -> list[str]:
    """Remove the entries ``<prefix><pid>-*`` of ``folder`` whose process ``pid`` is gone; return their paths.

    Entries of live processes (and of a reused pid) are left alone; so is everything not named this way.
    """
    owned = re.compile(rf"^{re.escape(prefix)}(\d+)-[^/]+$")
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = owned.match(entry.name)
        if m is None or int(m.group(1)) == os.getpid() or pid_alive(m.group(1)):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.path)
    return removed


def mkstemp_owned(prefix: str, folder: str | os.PathLike | None = None, *, suffix: str = "") -> Path:
    """A new empty temp file ``<prefix><pid>-<random><suffix>`` in ``folder`` (default: the temp dir),
    after removing those left there by dead processes."""
    folder = str(folder or tempfile.gettempdir())
    sweep_dead(folder, prefix)
    fd, path = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=suffix, dir=folder)
    os.close(fd)
    return Path(path)


def mkdtemp_owned(prefix: str, folder: str | os.PathLike | None = None) -> str:
    """A new temp folder ``<prefix><pid>-<random>``, after removing those left by dead processes."""
    folder = str(folder or tempfile.gettempdir())
    sweep_dead(folder, prefix)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=folder)
