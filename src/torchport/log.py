"""torchport's messages: one ``logging`` tree (``torchport.*``) and one console factory.

Library code logs through ``logging.getLogger("torchport.<area>")`` (or :func:`get_logger`) and never
configures logging: without a handler of yours, Python's last-resort handler shows warnings and errors
on stderr, and ``logging.getLogger("torchport").setLevel(logging.ERROR)`` silences torchport in your
program. The ``torchport`` command attaches :class:`CliHandler` (:func:`setup_cli`), which prints

    torchport: warning: MESSAGE
    torchport: error: MESSAGE

in colour on a terminal and as plain lines otherwise; ``torchport -q VERB`` shows errors only,
``-v`` adds info lines, ``-vv`` debug lines.

:func:`console` is the one place that builds a rich console: on a terminal it wraps to the window; when
the output is a pipe or a file it never hard-wraps (long lines stay whole for grep and log files).

Example::

    import logging
    logging.getLogger("torchport").setLevel(logging.ERROR)   # only errors from torchport
"""

from __future__ import annotations

import logging
import re
import sys
from typing import IO, Any, Optional

__all__ = ["get_logger", "setup_cli", "CliHandler", "console", "message_line", "strip_own_prefix", "NO_WRAP_WIDTH"]

ROOT = "torchport"
logging.getLogger(ROOT).addHandler(logging.NullHandler())

#: The width given to a console that does not write to a terminal: tables keep their natural width.
NO_WRAP_WIDTH = 10_000


def get_logger(name: str = "") -> logging.Logger:
    """``logging.getLogger("torchport.<name>")`` (the ``torchport`` root for an empty name)."""
    return logging.getLogger(f"{ROOT}.{name}" if name else ROOT)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def console(*, stderr: bool = False, file: Optional[IO[str]] = None, **kwargs: Any):
    """A ``rich.console.Console`` for ``file`` (default stdout, or stderr): wraps on a terminal, never
    hard-wraps elsewhere (``soft_wrap`` and a width tables do not reach)."""
    from rich.console import Console

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if not _is_terminal(stream) and not kwargs.get("force_terminal"):
        kwargs.setdefault("soft_wrap", True)
        kwargs.setdefault("width", NO_WRAP_WIDTH)
    if file is not None:
        kwargs["file"] = file
    elif stderr:
        kwargs["stderr"] = True
    return Console(**kwargs)   # without a file, rich looks sys.stdout/stderr up when it prints


_OWN_PREFIX = re.compile(r"^torchport(?: [a-z][\w-]*)?: ")


def strip_own_prefix(message: str) -> str:
    """``torchport shim: no accelerator`` -> ``no accelerator``: the line's heading already says torchport."""
    return _OWN_PREFIX.sub("", message.strip(), count=1)


def message_line(level: str, message: str, verb: str = "") -> str:
    """The one message vocabulary: ``torchport[ VERB]: LEVEL: MESSAGE`` (level: ``warning``, ``error`` ...);
    secrets are hidden (:func:`torchport.redact.redact`)."""
    from torchport.redact import redact

    return f"torchport{' ' + verb if verb else ''}: {level}: {redact(message)}"


_LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error",
                logging.CRITICAL: "error"}
_STYLES = {"warning": "yellow", "error": "bold red", "debug": "dim"}


class CliHandler(logging.Handler):
    """Writes ``torchport: LEVEL: MESSAGE`` lines to stderr: coloured on a terminal (rich), plain otherwise,
    never hard-wrapped. ``info`` records print the message alone (they are progress, not problems)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = strip_own_prefix(record.getMessage())
            if record.exc_info and record.levelno >= logging.DEBUG and self.level <= logging.DEBUG:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            level = _LEVEL_NAMES.get(record.levelno, record.levelname.lower())
            from torchport.redact import redact

            line = redact(text) if level == "info" else message_line(level, text)
            stream = sys.stderr
            if _is_terminal(stream):
                from rich.text import Text

                console(stderr=True, highlight=False).print(Text(line, style=_STYLES.get(level, "")), soft_wrap=True)
            else:
                stream.write(line + "\n")
                stream.flush()
        except (OSError, ValueError):   # a closed stream: nowhere to report
            pass


def setup_cli(verbosity: int = 0) -> None:
    """Attach the CLI handler to the ``torchport`` logger (once) and set its level from ``-q`` (-1) /
    ``-v`` (1) / ``-vv`` (2): errors only, default warnings, info, debug."""
    logger = logging.getLogger(ROOT)
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(max(-1, min(verbosity, 2)), logging.DEBUG)
    handler = next((h for h in logger.handlers if isinstance(h, CliHandler)), None)
    if handler is None:
        handler = CliHandler()
        logger.addHandler(handler)
    handler.setLevel(level)
    logger.setLevel(level)   # records still propagate: a root handler of yours (or pytest's caplog) sees them


def user_stacklevel() -> int:
    """The ``stacklevel`` for :func:`warnings.warn` that points at the first frame outside torchport: call it
    where ``warn`` is called (``warnings.warn(msg, stacklevel=user_stacklevel())``), so a warning names the
    user's line, not torchport's own (``torchport.device()`` -> ``current()`` -> ``select_device()``)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".", 1)[0] == "torchport":
        frame = frame.f_back
        level += 1
    return level
