"""What every verb shares: the one error printer and the mapping from exceptions to exit codes.

Verbs call :func:`fail` for a usage problem they detect themselves, and wrap their body in
:func:`guard` so a known torchport error becomes one line on stderr and its documented exit code
(:class:`torchport.errors.ExitCode`), never a traceback. Unknown exceptions are bugs and propagate.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Iterator, NoReturn

import typer

from torchport.errors import ExitCode, exit_code_for

__all__ = ["ExitCode", "fail", "guard", "guarded", "error_line"]


def error_line(verb: str, message: str) -> None:
    """Print ``torchport VERB: error: MESSAGE`` to stderr (plain text: no markup is interpreted)."""
    typer.echo(f"torchport {verb}: error: {message}", err=True)


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
        code = exit_code_for(exc)
        if code is None:
            raise
        error_line(verb, _first_line(exc))
        raise typer.Exit(int(code)) from None


def _check_environment() -> None:
    """A malformed ``TORCHPORT_EMULATE`` is a usage error (exit 2), found before the verb imports torch --
    whose device-backend autoload would otherwise turn it into a traceback, or a crash later on."""
    value = os.environ.get("TORCHPORT_EMULATE")
    if value and value.strip():
        from torchport.emulate import parse_env

        parse_env(value)


def guarded(name: str, callback):
    """``callback`` (a verb) run inside :func:`guard` and, except for ``run`` (whose warnings belong to the
    user's script), with warnings printed as one plain line (:mod:`torchport.cli._warnings`)."""

    @functools.wraps(callback)
    def verb(*args, **kwargs):
        from torchport.cli._warnings import plain_warnings

        with (contextlib.nullcontext() if name == "run" else plain_warnings()), guard(name):
            _check_environment()
            return callback(*args, **kwargs)

    verb.torchport_guard = name
    return verb
