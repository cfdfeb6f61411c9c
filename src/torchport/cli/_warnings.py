"""Warnings in CLI output: one line, ``torchport: warning: MESSAGE``, without the source path and line.

Python's default format (``/site-packages/torchport/runtime/distributed.py:110: CPUFallbackWarning: ...``
followed by the source line) is for library users; a CLI user needs only the message. The
warnings filters still decide what is shown (``-W`` / ``PYTHONWARNINGS`` keep working).
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterator

__all__ = ["plain_warnings", "format_warning"]


def format_warning(message, category) -> str:
    """``torchport: warning: MESSAGE`` (the category name only for warnings that are not torchport's)."""
    text = str(message).strip()
    module = getattr(category, "__module__", "") or ""
    name = "" if module.startswith("torchport") or category is UserWarning else f"{category.__name__}: "
    return f"torchport: warning: {name}{text}\n"


@contextlib.contextmanager
def plain_warnings() -> Iterator[None]:
    """Within the block, print warnings as :func:`format_warning` lines on stderr."""
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001 - the stdlib signature
        stream = file if file is not None else sys.stderr
        try:
            stream.write(format_warning(message, category))
        except (OSError, ValueError):  # a closed stream: nowhere to warn
            pass

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous
