"""Every measured table in README.md and docs/*.md says where its figures come from (issue 31, item 4).

A *measured table* is a markdown table where at least half of the body rows (and at least one) hold a number with
a unit of measurement (``img/s``, ``ms``, ``s``, ``MiB``, ``GB/s``, ``%``, a ratio ``1.5×`` ...). A table whose
numbers are not measurements (limits, settings, exit codes) says so with ``<!-- not measured -->`` on a line of the
paragraph above it.

Its *provenance* is in the paragraph right above the table or the one right below it (its caption and its
notes): a date (``2026-12-03``) or a commit (``commit 1a2b3c4``, ``@ `1a2b3c4```), or the honest
``provenance unknown``; and the machine it ran on or the command it came from (a backticked command, or a
word naming the machine: VM, cores, CPU, host ...).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_UNIT = re.compile(r"\d(?:[\d,.]*\d)?\s*(?:×|img/s|ms\b|ms/|µs|s\b|MiB|MB\b|GB\b|GiB|GB/s|%)")
_SEPARATOR = re.compile(r"^\|[\s:|-]+\|\s*$")
_WHEN = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bcommit\s+`?[0-9a-f]{7,40}\b|@\s*`?[0-9a-f]{7,40}\b|provenance unknown",
                   re.IGNORECASE)
_WHERE = re.compile(r"`[^`]+`|\b(?:VM|machine|cores?|CPU|host|AVX\w*|EPYC|Ascend|GPU)\b")
NOT_MEASURED = "<!-- not measured -->"


def tables(text: str) -> list[tuple[int, int, list[str]]]:
    """(first line, end line, lines) of each markdown table (0-based, end exclusive)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append((i, j, lines))
            i = j
        else:
            i += 1
    return out


def _paragraph(lines: list[str], start: int, step: int) -> list[str]:
    """The block of non-blank, non-table lines next to ``start`` going ``step`` (one blank line skipped)."""
    i, got = start, []
    if 0 <= i < len(lines) and not lines[i].strip():
        i += step
    while 0 <= i < len(lines) and lines[i].strip() and not lines[i].startswith("|"):
        got.append(lines[i])
        i += step
    return got


def measured(body: list[str]) -> bool:
    hits = sum(bool(_UNIT.search(row)) for row in body)
    return hits > 0 and 2 * hits >= len(body)


def missing(path: Path) -> list[str]:
    """``file:line`` of each measured table there without a provenance (or a ``not measured`` mark)."""
    bad = []
    for a, b, lines in tables(path.read_text(encoding="utf-8")):
        above, below = _paragraph(lines, a - 1, -1), _paragraph(lines, b, +1)
        if any(NOT_MEASURED in line for line in above) or not measured(lines[a + 2:b]):
            continue
        near = "\n".join([*above, lines[a], *below])
        if not (_WHEN.search(near) and _WHERE.search(near)):
            bad.append(f"{path.relative_to(ROOT)}:{a + 1}: {lines[a][:70]}")
    return bad


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_measured_tables_carry_provenance(path):
    bad = missing(path)
    assert not bad, ("measured tables without a provenance line (a date or commit, and the machine or command) "
                     f"in the paragraph above or below: {bad}; or mark a table that is not a measurement "
                     f"with {NOT_MEASURED}")


def test_the_check_catches_a_table_without_provenance(tmp_path):
    table = "| model | img/s |\n|---|---:|\n| tinycnn | 590 img/s |\n| resnet18 | 52 img/s |\n"
    bare = tmp_path / "bare.md"
    bare.write_text("Throughput:\n\n" + table, encoding="utf-8")
    dated = tmp_path / "dated.md"
    dated.write_text("Measured 2026-12-03 with `torchport bench` on the 2-core VM:\n\n" + table, encoding="utf-8")
    marked = tmp_path / "marked.md"
    marked.write_text(f"Targets {NOT_MEASURED}\n\n" + table, encoding="utf-8")
    far = tmp_path / "far.md"   # a date two paragraphs up is not this table's provenance
    far.write_text("Measured 2026-12-03 on the VM.\n\nThroughput:\n\n" + table, encoding="utf-8")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert missing(bare) and missing(far)
        assert not missing(dated) and not missing(marked)
    finally:
        ROOT = old
