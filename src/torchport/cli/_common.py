"""What every verb shares: the one error printer and the mapping from exceptions to exit codes.

Verbs call :func:`fail` for a usage problem they detect themselves, and wrap their body in
:func:`guard` so a known torchport error becomes one line on stderr and its documented exit code
(:class:`torchport.errors.ExitCode`), never a traceback. Unknown exceptions are bugs and propagate.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from typing import Iterator, NoReturn

import typer

from torchport.errors import ExitCode, exit_code_for, raised_on_every_rank

__all__ = ["ExitCode", "fail", "guard", "guarded", "error_line", "missing_extra", "EXTRAS", "current_verb"]

#: the verb running now (``data pack``), set by :func:`guarded`: helpers shared by sub-verbs name the right one
_VERB: contextvars.ContextVar[str] = contextvars.ContextVar("torchport_verb", default="")


def current_verb(default: str = "") -> str:
    """The verb whose callback is running (``"data pack"``), or ``default`` outside one."""
    return _VERB.get() or default

#: top-level module -> (the pip package, the torchport extra that installs it). The plain install is the
#: migration tools only (scan/fix never import any of these); a verb that needs one says what to install.
EXTRAS = {
    "torch": ("torch", "train"), "torchvision": ("torchvision", "train"), "numpy": ("numpy", "train"),
    "PIL": ("pillow", "train"), "simplejpeg": ("simplejpeg", "train"), "matplotlib": ("matplotlib", "train"),
    "yaml": ("pyyaml", "train"), "ninja": ("ninja", "train"),
    "fsspec": ("s3fs", "s3"), "s3fs": ("s3fs", "s3"),
    "skimage": ("scikit-image", "bench"), "nvidia": ("nvidia-dali-cuda120", "bench"),
}


def missing_extra(exc: BaseException) -> str | None:
    """For an ImportError of a package an extra provides: the one line saying what to install; else None."""
    if not isinstance(exc, ImportError):
        return None
    root = (getattr(exc, "name", None) or "").split(".")[0]
    if root not in EXTRAS:
        return None
    package, extra = EXTRAS[root]
    return (f"this needs {package}, which is not installed (the plain install is the migration tools only); "
            f"install it with: pip install 'torchport[{extra}]'")


def _rank() -> int:
    """This process's rank in a distributed run (torchrun's ``RANK``), 0 alone or when the variable is malformed."""
    from torchport.env import env_int

    try:
        return env_int("RANK", 0) or 0
    except Exception:  # noqa: BLE001 - a malformed variable is reported by the verb itself, not here
        return 0


def _rank_prefix(message: str) -> str:
    """``"rank N: "`` in a process of a distributed run (torchrun's ``WORLD_SIZE`` > 1) whose message does not
    already name its rank, else ``""``: each rank's one line says which rank failed."""
    from torchport.env import env_int

    try:
        world, rank = env_int("WORLD_SIZE", 1) or 1, env_int("RANK", 0) or 0
    except Exception:  # noqa: BLE001 - a malformed variable is reported by the verb itself, not here
        return ""
    return f"rank {rank}: " if world > 1 and not message.startswith(f"rank {rank}") else ""


def error_line(verb: str, message: str) -> None:
    """Print ``torchport VERB: error: MESSAGE`` to stderr (plain text: no markup is interpreted); in a
    distributed run ``MESSAGE`` starts with ``rank N: ``."""
    from torchport.log import message_line

    typer.echo(message_line("error", _rank_prefix(message) + message, verb), err=True)


def fail(verb: str, message: str, code: int = ExitCode.USAGE) -> NoReturn:
    """Print one error line and exit with ``code``."""
    error_line(verb, message)
    raise typer.Exit(int(code))


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


@contextlib.contextmanager
def guard(verb: str) -> Iterator[None]:
    """Turn known torchport errors raised inside the block into one line + their exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        error_line(verb, "interrupted")
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except Exception as exc:  # noqa: BLE001 - mapped below, re-raised when unknown
        hint = missing_extra(exc)
        if hint is not None:
            error_line(verb, hint)
            raise typer.Exit(int(ExitCode.USAGE)) from None
        code = exit_code_for(exc)
        if code is None:
            raise
        if raised_on_every_rank(exc):     # the same error on every rank: one line for the run, from rank 0
            if _rank() == 0:
                from torchport.log import message_line

                typer.echo(message_line("error", _first_line(exc), verb), err=True)
        else:
            error_line(verb, _first_line(exc))
        raise typer.Exit(int(code)) from None


def _check_environment() -> None:
    """A malformed ``TORCHPORT_EMULATE``, or one the emulator cannot honour (no C++ compiler for its first
    build), is a usage error (exit 2), found before the verb imports torch --
    whose device-backend autoload would otherwise turn it into a traceback, or a crash later on."""
    value = os.environ.get("TORCHPORT_EMULATE")
    if value and value.strip():
        from torchport.emulate import _native, parse_env
        from torchport.emulate.autoload import EmulateError

        parse_env(value)
        try:  # no compiler and nothing cached: the autoload inside `import torch` would fail
            _native.preflight()
        except _native.NativeBuildError as exc:
            raise EmulateError(f"TORCHPORT_EMULATE={value}: {exc}") from None


def guarded(name: str, callback):
    """``callback`` (a verb) run inside :func:`guard`, with warnings printed as one plain line
    (:mod:`torchport.cli._warnings`) -- under ``run`` only torchport's own: the script's other warnings
    belong to it and keep Python's format."""

    @functools.wraps(callback)
    def verb(*args, **kwargs):
        from torchport.cli._warnings import plain_warnings

        token = _VERB.set(name)
        try:
            with plain_warnings(only_torchport=name == "run"), guard(name):
                _check_environment()
                return callback(*args, **kwargs)
        finally:
            _VERB.reset(token)

    verb.torchport_guard = name
    return verb
