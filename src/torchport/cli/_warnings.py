"""Warnings in CLI output: one line, ``torchport: warning: MESSAGE``, without the source path and line.

Python's default format (``/site-packages/torchport/runtime/distributed.py:110: CPUFallbackWarning: ...``
followed by the source line) is for library users; a CLI user needs only the message. The
warnings filters still decide what is shown (``-W`` / ``PYTHONWARNINGS`` keep working).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

__all__ = ["plain_warnings", "format_warning", "warning_text"]


def _ours(category) -> bool:
    return (getattr(category, "__module__", "") or "").startswith("torchport")


def warning_text(message, category) -> str:
    """The text after ``torchport: warning:`` -- the category name only for warnings that are not torchport's;
    a message's own ``torchport shim:`` style prefix is dropped (the line already says torchport)."""
    from torchport.log import strip_own_prefix

    name = "" if _ours(category) or category is UserWarning else f"{category.__name__}: "
    return name + strip_own_prefix(str(message))


def format_warning(message, category) -> str:
    """``torchport: warning: MESSAGE`` and a newline (:func:`warning_text`)."""
    from torchport.log import message_line

    return message_line("warning", warning_text(message, category)) + "\n"


@contextlib.contextmanager
def plain_warnings(*, only_torchport: bool = False) -> Iterator[None]:
    """Within the block, print warnings as :func:`format_warning` lines on stderr (through the
    ``torchport.warnings`` logger). ``only_torchport``: other warnings keep Python's format (``run``:
    the user's script owns them)."""
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001 - the stdlib signature
        if only_torchport and not _ours(category):
            return previous(message, category, filename, lineno, file, line)
        if file is None:   # through the torchport logger: -q silences it, the CLI handler prints the one line
            from torchport.log import get_logger

            get_logger("warnings").warning(warning_text(message, category))
            return
        try:
            file.write(format_warning(message, category))
        except (OSError, ValueError):  # a closed stream: nowhere to warn
            pass

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous
