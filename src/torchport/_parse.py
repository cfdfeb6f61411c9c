"""The one parser for JSON / TOML / YAML that may come from elsewhere: size and depth limits, one-line refusals.

A manifest (``index.json``), a parity reference, a ``profile --config``, a ``bench compare`` report or a
scanned repository's ``pyproject.toml`` is data someone else wrote. Python's parsers accept any size and
nesting; a deeply nested document raises ``RecursionError`` (a traceback) in the parser or in the code
that walks the result, and YAML's tags (``!!python/object``) are not data at all. :func:`loads` refuses:

* more than ``max_bytes`` (default :data:`MAX_BYTES`, 64 MiB; ``TORCHPORT_PARSE_MAX_BYTES``);
* nesting deeper than ``max_depth`` (default :data:`MAX_DEPTH`, 64 levels; ``TORCHPORT_PARSE_MAX_DEPTH``),
  counted without recursion on the parsed value, and a parser that runs out of stack on the way;
* integers of more than 4300 digits (Python's own limit: ``ValueError``), ``NaN``/``Infinity`` literals
  stay as JSON allows them;
* YAML beyond plain data (``yaml.safe_load``'s refusal of ``!!python/...`` tags).

Each refusal is a :class:`ParseError` (a ``ValueError``, so the callers' existing one-line handling applies)
naming the file, what was wrong and the limit.

Example::

    from torchport._parse import loads
    doc = loads(path.read_bytes(), fmt="json", what=str(path))
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ParseError", "loads", "depth", "MAX_BYTES", "MAX_DEPTH"]

MAX_BYTES = 64 << 20
MAX_DEPTH = 64


class ParseError(ValueError):
    """A document from elsewhere that is too big, too deep or not plain data (the message names it)."""


def _limit(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name) or default))
    except ValueError:
        return default


def depth(value: Any) -> int:
    """Nesting depth of dicts/lists in ``value`` (a scalar is 0), computed iteratively."""
    best, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items = v.values()
        elif isinstance(v, (list, tuple)):
            items = v
        else:
            continue
        best = max(best, d)
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list, tuple)))
    return best


def loads(data: str | bytes, *, fmt: str, what: str, max_bytes: int | None = None,
          max_depth: int | None = None) -> Any:
    """Parse ``data`` as ``fmt`` (``"json"``, ``"toml"`` or ``"yaml"``) within the limits.

    Args:
        data: the document (bytes are decoded as UTF-8).
        what: the file or URL, named in the refusal.

    Raises:
        ParseError: too big, too deep, undecodable or not plain data; a syntax error of the format
            (``json.JSONDecodeError``, ``tomllib.TOMLDecodeError``, ``yaml.YAMLError``) also becomes one.
    """
    max_bytes = max_bytes or _limit("TORCHPORT_PARSE_MAX_BYTES", MAX_BYTES)
    max_depth = max_depth or _limit("TORCHPORT_PARSE_MAX_DEPTH", MAX_DEPTH)
    size = len(data)
    if size > max_bytes:
        raise ParseError(f"{what}: {size} bytes is more than the {max_bytes} a {fmt.upper()} document may have "
                         "here (TORCHPORT_PARSE_MAX_BYTES); is this the right file?")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"{what}: not UTF-8 text ({exc.reason} at byte {exc.start}); is this the right file?") from None
    deep = (f"{what}: nested deeper than {max_depth} levels (TORCHPORT_PARSE_MAX_DEPTH); "
            "a document from elsewhere is refused rather than parsed")
    try:
        value = _parse(data, fmt, what)
    except RecursionError:
        raise ParseError(deep) from None
    if depth(value) > max_depth:
        raise ParseError(deep)
    return value


def _parse(text: str, fmt: str, what: str) -> Any:
    if fmt == "json":
        import json

        try:
            return json.loads(text)
        except ValueError as exc:      # JSONDecodeError, and the int digit limit
            raise ParseError(f"{what}: not valid JSON ({str(exc).splitlines()[0][:200]})") from None
    if fmt == "toml":
        try:
            import tomllib
        except ImportError:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            return tomllib.loads(text)
        except ValueError as exc:      # TOMLDecodeError
            raise ParseError(f"{what}: not valid TOML ({str(exc).splitlines()[0][:200]})") from None
    if fmt == "yaml":
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.constructor.ConstructorError as exc:
            raise ParseError(f"{what}: not plain data ({str(exc.problem or exc).splitlines()[0][:200]}); YAML tags "
                             "such as !!python/... are refused") from None
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise ParseError(f"{what}: not valid YAML ({first})") from None
    raise ValueError(f"unknown format {fmt!r}")
