"""The one JSON report writer: ``-`` is stdout, files are written atomically (parents created)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["write_json"]


def write_json(path: str | os.PathLike | None, payload: Any) -> str | None:
    """Write ``payload`` (an object, or JSON text) to ``path``; ``-`` writes to stdout.

    Returns:
        The path written, or None for stdout / no path.
    """
    if path is None:
        return None
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=2, default=str)
    text = text if text.endswith("\n") else text + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, p)
    return str(p)
