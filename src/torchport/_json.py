"""The one report writer: ``-`` is stdout, files are written atomically (parents created).

:func:`write_text` writes any report text (JSON, SARIF, CSV, JUnit, HTML, Markdown, text);
:func:`write_json` serialises an object first and ends the text with a newline;
:func:`check_writable` refuses, before any work, a path that can never be written (a folder in it
is a file, the path is a directory, a read-only parent). A failed write is one
:class:`~torchport.errors.WriteError` naming the file and the OS reason (disk full ...), never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from torchport.errors import WriteError

__all__ = ["write_json", "write_text", "check_writable"]


def check_writable(path: str | os.PathLike | None, *, what: str = "output") -> None:
    """Raise :class:`WriteError` when ``path`` cannot be written, before any work is done.

    ``None`` and ``-`` (stdout) always pass; URLs (``scheme://``) are left to their store.
    """
    if path is None or str(path) == "-" or "://" in str(path):
        return
    p = Path(path)
    if p.is_dir():
        raise WriteError(f"cannot write {what} {str(p)!r}: it is a directory; name a file")
    for parent in p.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise WriteError(f"cannot write {what} {str(p)!r}: {str(parent)!r} is a file, not a directory; "
                                 "choose another path")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise WriteError(f"cannot write {what} {str(p)!r}: directory {str(parent)!r} is not writable; "
                                 "choose another path")
            return


def write_text(path: str | os.PathLike | None, text: str) -> str | None:
    """Write ``text`` to ``path`` (a temp file beside it, then a rename), secrets hidden
    (:func:`torchport.redact.redact`); ``-`` writes to stdout.

    Returns:
        The path written, or None for stdout / no path.
    """
    from torchport.redact import redact

    if path is None:
        return None
    text = redact(text)
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        raise WriteError(f"cannot write {str(p)!r}: {_reason(exc, p)}") from None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass
    return str(p)


def _reason(exc: OSError, p: Path) -> str:
    """The OS reason and the fix, in words (ENOSPC: free space; a file where a folder should be ...)."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{exc.strerror} (disk full); free space on that file system or choose another path"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        return f"{exc.strerror}: a folder on the way is a file; choose another path"
    return f"{exc.strerror or exc}; choose a writable path"


def write_json(path: str | os.PathLike | None, payload: Any) -> str | None:
    """Write ``payload`` (an object, or JSON text) to ``path``; ``-`` writes to stdout.

    Returns:
        The path written, or None for stdout / no path.
    """
    if path is None:
        return None
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=2, default=str)
    return write_text(path, text if text.endswith("\n") else text + "\n")


def write_reports(verb: str, outputs: Any, render: Any, *, announce: Any = None, path_for: Any = None) -> bool:
    """Write each report of ``outputs`` (objects with ``fmt``, ``path``, ``to_stdout``: the CLI's ``-o`` values)
    atomically (``-`` = stdout) and announce ``wrote PATH`` (default: on stderr). A file that cannot be written is
    one error line naming ``verb``; the others are still written. Returns True when every report was written.

    Library code (``torchport run``'s report files) and the verbs share it; no CLI framework is imported."""
    import sys

    from torchport.log import message_line

    say = announce or (lambda line: sys.stderr.write(line + "\n"))
    ok = True
    for out in outputs:
        path = out.path if out.to_stdout or path_for is None else path_for(out.path)
        try:
            written = write_text(path, render(out.fmt))
        except OSError as exc:
            sys.stderr.write(message_line("error", f"cannot write {path}: {exc.strerror or exc}", verb) + "\n")
            ok = False
            continue
        if written is not None:
            say(f"wrote {written}")
    return ok
