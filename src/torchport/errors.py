"""torchport's error vocabulary: one base class, one exit-code table, shared by every verb.

Every user-facing error names the thing that is wrong and the fix, in one line. The CLI maps an
exception to its exit code through :func:`exit_code_for`; nothing else decides exit codes.

Exit codes (documented in the README; frozen by tests):

====  ==================  ==========================================================================
code  name                meaning
====  ==================  ==========================================================================
0     OK                  success
1     FAILED              findings reported, checks failed, ``fix --check`` found fixable code
2     USAGE               bad flag, config key, environment variable, unknown or unavailable device
3     DATA                bad input data (unreadable source, corrupt shard, bad images over the limit)
4     DIVERGED            training produced a non-finite loss
5     CHECKPOINT          a checkpoint cannot be written, read or verified
6     IO                  a file or object could not be read, parsed or written (scan/fix, pack, reports)
7     NO_ACCELERATOR      ``--require-accelerator`` (or its env var) is set and none is present
8     DISTRIBUTED         a rank died or a collective timed out
9     BUSY                another trainer holds the run directory / checkpoint prefix (one writer per run)
130   INTERRUPTED         Ctrl-C (SIGINT); ``train`` stops gracefully first: checkpoint, summary, resume command
143   TERMINATED          SIGTERM (``timeout``, Kubernetes, Slurm); ``train`` stops gracefully as for Ctrl-C
====  ==================  ==========================================================================

``torchport check``: a check that cannot prove anything here (parity recorded and replayed on the same
device, the device audit on a CPU-only machine) is SKIP with the reason, not PASS; SKIP does not fail
the run (exit 0), FAIL does (exit 1).
"""

from __future__ import annotations

import enum

__all__ = ["ExitCode", "TorchportError", "ConfigError", "StorageError", "WriteError", "exit_code_for", "on_every_rank",
           "raised_on_every_rank"]


class ExitCode(enum.IntEnum):
    """Process exit codes of every ``torchport`` verb."""

    OK = 0
    FAILED = 1
    USAGE = 2
    DATA = 3
    DIVERGED = 4
    CHECKPOINT = 5
    IO = 6
    NO_ACCELERATOR = 7
    DISTRIBUTED = 8
    BUSY = 9
    INTERRUPTED = 130
    TERMINATED = 143


class TorchportError(Exception):
    """Base of torchport's user-facing errors; ``exit_code`` says how the CLI exits on it."""

    exit_code: ExitCode = ExitCode.FAILED


class ConfigError(TorchportError, ValueError):
    """A malformed setting (environment variable, flag or config key); the message names it."""

    exit_code = ExitCode.USAGE


class StorageError(TorchportError, RuntimeError):
    """An object-store request failed for good (missing object, denied, unreachable endpoint, or
    transient errors past the retry budget); the message names the URL and the fix.

    Deliberately not an ``OSError``: a storage failure must never be mistaken for one undecodable
    sample (which the data pipeline may skip); it stops the job instead.
    """

    exit_code = ExitCode.IO


class WriteError(TorchportError, OSError):
    """An output file (report, ``--json``, summary, metrics) cannot be written: its folder is a file, it is
    read-only, or the disk is full. The message names the file, the OS reason and what to do."""

    exit_code = ExitCode.IO


def exit_code_for(exc: BaseException) -> ExitCode | None:
    """The exit code for ``exc``, or None when it is not a known user-facing error (a bug)."""
    code = getattr(type(exc), "exit_code", None)
    if code is not None:
        return ExitCode(int(code))
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return None


def on_every_rank(exc: BaseException) -> BaseException:
    """Mark ``exc`` as raised with the same message on every rank of a distributed run (a collective checkpoint
    save or load that failed, a decision rank 0 made and shared): the CLI prints it once for the run, on rank 0,
    and every rank exits with its code. Returns ``exc``."""
    exc.torchport_every_rank = True
    return exc


def raised_on_every_rank(exc: BaseException) -> bool:
    """True for an error :func:`on_every_rank` marked."""
    return bool(getattr(exc, "torchport_every_rank", False))
