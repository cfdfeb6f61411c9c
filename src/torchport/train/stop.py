"""Graceful stop: SIGTERM and SIGINT end a training run cleanly instead of killing it mid-write.

``timeout``, Kubernetes and Slurm send SIGTERM (then SIGKILL after a grace period); Ctrl-C sends
SIGINT to the whole foreground process group, DataLoader workers included. While a run is going:

* the first signal only sets a flag; the loop checks it once per optimizer step, finishes that step,
  writes a checkpoint (mid-epoch position included, so a resume continues exactly there),
  ``summary.json`` and ``curves.png``, prints the exact resume command and exits with
  :attr:`~torchport.errors.ExitCode.INTERRUPTED` (130, SIGINT) or
  :attr:`~torchport.errors.ExitCode.TERMINATED` (143 = 128 + 15, SIGTERM, the shell's convention);
* a second signal abandons the step at once (the previous checkpoint is kept: checkpoints are
  written atomically) and exits with the same code;
* forked DataLoader workers inherit the handler but ignore the signal (the main process stops them),
  so Ctrl-C prints no worker tracebacks.

Handlers are installed only for the run (:func:`stop_requests`) and only in the main thread; the
previous ones are restored afterwards.

Example::

    with stop_requests() as stop:
        for batch in loader:
            ...
            if stop.requested:
                break
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator

from torchport.errors import ExitCode, TorchportError

__all__ = ["StopRequest", "stop_requests", "Stopped", "Interrupted", "Terminated", "resume_command"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(TorchportError):
    """The run stopped on a signal after saving what it could; the message holds the resume command.
    ``result`` is the run's :class:`~torchport.train.loop.TrainResult` (None when the step was abandoned)."""

    result = None


class Interrupted(Stopped):
    """Stopped by SIGINT (Ctrl-C)."""

    exit_code = ExitCode.INTERRUPTED


class Terminated(Stopped):
    """Stopped by SIGTERM."""

    exit_code = ExitCode.TERMINATED


class StopRequest:
    """The stop flag of one run. ``requested`` is the signal name once a signal arrived, else None."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.pid = os.getpid()
        self.announce = lambda line: None   # set by the trainer: prints the "stopping" line
        self.resume: str | None = None       # set by the trainer once the run dir is known: the resume command

    @property
    def requested(self) -> str | None:
        """``"SIGINT"`` / ``"SIGTERM"`` after a signal, else None."""
        return signal.Signals(self.signum).name if self.signum is not None else None

    def error(self, message: str) -> Stopped:
        """The exception that ends the run with this signal's exit code."""
        return (Terminated if self.signum == signal.SIGTERM else Interrupted)(message)

    def _handle(self, signum, frame) -> None:
        if os.getpid() != self.pid:
            return          # a forked DataLoader worker: the main process stops it
        if self.signum is None:
            self.signum = signum
            self.announce(f"{signal.Signals(signum).name}: stopping after this step (checkpoint, summary, "
                          "resume command); send it again to abandon the step")
            return
        raise self.error(f"{signal.Signals(signum).name} again: step abandoned; the last checkpoint written is kept"
                         + (f"; resume with: {self.resume}" if self.resume else ""))


@contextlib.contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """Install SIGINT/SIGTERM handlers for the block (main thread only; elsewhere the flag never sets)."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {s: signal.signal(s, stop._handle) for s in _SIGNALS}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def resume_command(run_dir, resume_path) -> str:
    """The exact command that continues this run: the resolved config it wrote (``config.yaml``, or
    ``config.resumed.yaml`` when it was itself resumed), its run dir, ``--resume auto``."""
    import shlex
    from pathlib import Path

    config = Path(run_dir) / ("config.resumed.yaml" if resume_path else "config.yaml")
    return shlex.join(["torchport", "train", "--config", str(config), "--run-dir", str(run_dir), "--resume", "auto"])
