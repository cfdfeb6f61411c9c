"""docs/bad-inputs.md is exactly the rendering of the rows the bad-input tests check."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _renderer():
    spec = importlib.util.spec_from_file_location("render_bad_inputs", REPO / "tools" / "render_bad_inputs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_bad_inputs_page_matches_the_tested_rows():
    mod = _renderer()
    rows = mod.load_rows()
    assert len(rows) >= 10, "the bad-inputs table lost its rows"
    assert len({r["id"] for r in rows}) == len(rows)
    assert (REPO / "docs" / "bad-inputs.md").read_text(encoding="utf-8") == mod.render(rows), \
        "docs/bad-inputs.md is stale: run .venv/bin/python tools/render_bad_inputs.py"


def test_every_row_is_checked_by_a_test():
    """A row whose test was deleted would document behaviour nobody checks any more."""
    rows = json.loads((REPO / "tests" / "golden" / "bad_inputs.json").read_text())
    sources = "".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("test_*.py"))
    missing = [r["id"] for r in rows if f'"{r["id"]}"' not in sources]
    assert not missing, f"rows with no test: {missing}"
