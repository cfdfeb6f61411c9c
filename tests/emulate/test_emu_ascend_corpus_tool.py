"""tools/ascend_corpus.py (issue 37 item 5): its bad-input lines and its table, without the third-party code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "ascend_corpus.py"
sys.path.insert(0, str(TOOL.parent))
import ascend_corpus as ac  # noqa: E402


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_bad_inputs_say_one_line_and_exit_2(tmp_path):
    p = _run("--only", "no-such-recipe", "--mirrors", str(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no recipe named no-such-recipe" in p.stderr
    p = _run("--mirrors", str(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "github:Ascend/ModelZoo-PyTorch" in p.stderr


def test_recipes_are_pinned_distinct_and_many():
    assert len(ac.COMMIT) == 40 and len(ac.RECIPES) >= 25
    assert len({r.name for r in ac.RECIPES}) == len(ac.RECIPES)
    assert len({r.family for r in ac.RECIPES}) >= 12


def test_table_rows_say_status_and_cause():
    rec = ac.RECIPES[0]
    ok = ac.Result(rec, 0, 2, [6.5, 6.25], "", 1.0)
    nan = ac.Result(rec, 0, 2, [6.5, float("nan")], "", 1.0)
    bad = ac.Result(rec, 1, 0, [], "AttributeError: x | y (at main.py:3)", 1.0)
    assert (ok.status, nan.status, bad.status) == ("trains", "steps, loss not finite", "fails")
    table = ac.markdown([ok, nan, bad]).splitlines()
    assert table[0].startswith(f"Ascend/ModelZoo-PyTorch@{ac.COMMIT[:10]}")
    rows = table[4:]
    assert "| 6.5, 6.25 |" in rows[0] and "| yes |" in rows[0]
    assert "AttributeError: x / y (at main.py:3)" in rows[2] and rows[2].count("|") == rows[0].count("|")
