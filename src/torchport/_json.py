"""The one report writer: ``-`` is stdout, files are written atomically (parents created).

:func:`write_text` writes any report text (JSON, SARIF, CSV, JUnit, HTML, Markdown, text);
:func:`write_json` serialises an object first and ends the text with a newline.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["write_json", "write_text"]


def write_text(path: str | os.PathLike | None, text: str) -> str | None:
    """Write ``text`` as is to ``path`` (a temp file beside it, then a rename); ``-`` writes to stdout.

    Returns:
        The path written, or None for stdout / no path.
    """
    if path is None:
        return None
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return str(p)


def write_json(path: str | os.PathLike | None, payload: Any) -> str | None:
    """Write ``payload`` (an object, or JSON text) to ``path``; ``-`` writes to stdout.

    Returns:
        The path written, or None for stdout / no path.
    """
    if path is None:
        return None
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=2, default=str)
    return write_text(path, text if text.endswith("\n") else text + "\n")
