"""Test-only entry point: ``python tests/train/fault_train.py ARGS`` == ``torchport train ARGS`` plus faults
injected from outside the loop, through :func:`torchport.train.loop.train`'s ``callbacks`` (the production loop
reads no test variables). Usable under torchrun (``torchrun ... tests/train/fault_train.py ARGS``).

* ``TORCHPORT_FAULT_STEP_DELAY_S=0.15`` -- sleep after every optimizer step (so a test can SIGKILL mid-epoch);
* ``TORCHPORT_FAULT_EXIT=RANK:STEP`` -- that rank exits with status 3 right after that optimizer step, in the
  first attempt only (``TORCHELASTIC_RESTART_COUNT`` 0 or unset), so an elastic restart runs through;
* ``TORCHPORT_FAULT_HANG=RANK:STEP`` -- that rank stops answering right after that optimizer step (sleeps, alive,
  in no collective), first attempt only: the others wait in their next collective until the collective timeout;
* ``TORCHPORT_FAULT_KILL_PID=RANK:STEP:PID`` -- that rank SIGKILLs process PID right after that optimizer step
  (an S3 endpoint, or a proxy in front of one, dying just before the checkpoint of that step is written);
* ``TORCHPORT_FAULT_FILL=RANK:STEP:FILE`` -- that rank fills the filesystem holding FILE (zeros written to FILE
  until ENOSPC) right after that optimizer step: the disk is full when the checkpoint of that step is written;
* ``TORCHPORT_FAULT_DIE_IN_SAVE=RANK:STEP`` -- that rank exits with status 3 in the middle of the checkpoint of
  that step (its first ``os.fsync`` of a shard file: the shard is written, not synced, nothing committed);
* ``TORCHPORT_FAULT_ENOSPC=RANK:STEP`` -- from that step on, that rank's ``os.fsync`` fails with ENOSPC (a full
  disk as its checkpoint files are synced, without filling a real one: the probes use a small tmpfs).
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import time


def _at(name: str, rank: int, step: int) -> list[str] | None:
    """The rest of ``TORCHPORT_FAULT_<name>=RANK:STEP[:REST]`` when it names this rank and step, else None."""
    value = os.environ.get(f"TORCHPORT_FAULT_{name}")
    if not value:
        return None
    parts = value.split(":", 2)
    return parts[2:] if (int(parts[0]), int(parts[1])) == (rank, step) else None


def _fill(path: str) -> None:
    chunk = b"\0" * (1 << 16)
    with open(path, "ab") as fh:
        try:
            while True:
                fh.write(chunk)
                fh.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    try:                       # the last partial chunk: the filesystem is now full to the byte
        with open(path, "ab", buffering=0) as fh:
            while fh.write(b"\0" * 512):
                pass
    except OSError:
        pass


def fault(*, step: int, epoch: int, rank: int) -> None:
    delay = float(os.environ.get("TORCHPORT_FAULT_STEP_DELAY_S") or 0)
    if delay:
        time.sleep(delay)
    exit_at = os.environ.get("TORCHPORT_FAULT_EXIT")
    first_attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0) == 0
    if exit_at and first_attempt and tuple(int(v) for v in exit_at.split(":")) == (rank, step):
        os._exit(3)
    hang_at = os.environ.get("TORCHPORT_FAULT_HANG")
    if hang_at and first_attempt and tuple(int(v) for v in hang_at.split(":")) == (rank, step):
        while True:
            time.sleep(3600)
    if (pid := _at("KILL_PID", rank, step)) is not None:
        os.kill(int(pid[0]), signal.SIGKILL)
        time.sleep(0.2)
    if (path := _at("FILL", rank, step)) is not None:
        _fill(path[0])
    if _at("DIE_IN_SAVE", rank, step) is not None:
        def die(fd):
            os._exit(3)
        os.fsync = die
    if _at("ENOSPC", rank, step) is not None:
        def full(fd):
            raise OSError(errno.ENOSPC, "No space left on device")
        os.fsync = full


if __name__ == "__main__":
    from torchport.cli.train import main
    from torchport.train import loop

    loop.train = functools.partial(loop.train, callbacks=[fault])
    main()
