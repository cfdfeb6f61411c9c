"""Every output format escapes what it embeds (names from elsewhere: file names, target names, platform strings,
class folder names). One function per format, used by every renderer:

* :func:`md_cell` / :func:`md_code` -- Markdown table cells and code spans (a backtick cannot close the span,
  ``|`` cannot split a cell, ``<script>`` is not raw HTML);
* :func:`csv_cell` -- OWASP's CSV-injection rule: a cell starting with ``= + - @``, tab or CR gets a leading
  ``'`` so a spreadsheet shows it as text, never as a formula;
* :func:`uri_ref` -- an RFC 3986 URI reference for a relative path (SARIF ``artifactLocation.uri``);
* :func:`xml_text` -- characters XML 1.0 forbids (control characters) replaced (JUnit);
* :func:`terminal` -- escape sequences and control characters shown as ``\\x1b`` (multi-line text on a terminal);
* :func:`terminal_name` -- one name from elsewhere (a file, a class folder, a shard) on one line of a rich
  console: every control character (newline and tab too) shown as ``\\xNN``, rich markup (``[red]``) shown
  as text, not interpreted.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

__all__ = ["md_cell", "md_code", "csv_cell", "uri_ref", "xml_text", "terminal", "terminal_name"]

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def md_cell(value: Any) -> str:
    """``value`` safe inside a Markdown table cell or paragraph: ``|`` escaped, HTML and backticks as entities,
    newlines as spaces."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "&#96;")
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_code(value: Any) -> str:
    """``value`` as one Markdown code span: fenced by more backticks than any run inside it (CommonMark), so
    nothing inside can close it; HTML inside a code span is shown, not run."""
    text = str(value).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run (OWASP CSV injection): text starting with ``= + - @``, tab or CR
    is prefixed with ``'``. Numbers are returned unchanged."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def uri_ref(path: str) -> str:
    """A relative POSIX path as an RFC 3986 URI reference (``with space.py`` -> ``with%20space.py``)."""
    return urllib.parse.quote(path, safe="/-._~!$&'()*+,;=:@")


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 forbids (each becomes U+FFFD)."""
    return _XML_BAD.sub("\ufffd", text)


def terminal(value: Any) -> str:
    """``value`` with escape sequences and control characters made visible (``\\x1b``), never interpreted."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def terminal_name(value: Any) -> str:
    """``value`` (a name read from a data set, a manifest, a file system) safe on one line of a rich console:
    control characters -- ESC, newline, tab, CR, C1, U+2028/9 -- shown as ``\\xNN`` / ``\\uNNNN``, and ``[`` escaped
    so rich markup inside the name is shown, never interpreted (``[link=...]``, ``[red]``)."""
    from rich.markup import escape

    shown = _CONTROL_ALL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                             else f"\\u{ord(m.group()):04x}", str(value))
    return escape(shown)
