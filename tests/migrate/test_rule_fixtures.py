"""Fixture-driven rule tests, collected from ``tests/fixtures/migrate/<CODE>/``.

Per rule directory:

* ``case.py`` -> ``case.expected``: every finding (default rules + this one) as
  ``line:col-end_line:end_col CODE fix-safety``; the rule must fire on its own case;
* ``notrigger.py``: must produce no findings at all (look-alikes: other libraries'
  ``cuda``, a variable named ``cuda``, ``"cuda"`` in log messages ...);
* ``case.in.py`` (or ``case.py`` when there is no separate fix input) -> ``case.out.py``:
  the rule's fixes (unsafe included); the output must parse, be a fixed point (fixing
  again changes nothing) and leave no fixable finding. Present for every fixable rule.
"""

from __future__ import annotations

import ast

import pytest

from migrate_helpers import FIXTURES, check_golden
from torchport.migrate import catalog, fix_source, scan_source

CODES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
DEFAULT = [r.code for r in catalog.rules() if r.default_enabled]


def _select(code: str) -> list[str]:
    return sorted({*DEFAULT, code})


def _lines(findings) -> str:
    return "".join(f"{f.line}:{f.column}-{f.end_line}:{f.end_column} {f.code} {f.fix_safety}\n" for f in findings)


def test_every_rule_has_fixtures():
    codes = {r.code for r in catalog.rules()}
    assert codes == set(CODES), f"fixture dirs without a rule: {set(CODES) - codes}; rules without: {codes - set(CODES)}"
    for rule in catalog.rules():
        d = FIXTURES / rule.code
        assert (d / "case.py").exists() and (d / "notrigger.py").exists(), rule.code
        if rule.fix != "none":
            assert (d / "case.out.py").exists(), f"{rule.code} has a fix but no case.out.py golden"


@pytest.mark.parametrize("code", CODES)
def test_case_findings(code):
    src = (FIXTURES / code / "case.py").read_text(encoding="utf-8")
    res = scan_source(src, f"{code}/case.py", select=_select(code))
    assert res.error is None
    assert code in {f.code for f in res.findings}, f"{code} does not fire on its own case.py"
    check_golden(FIXTURES / code / "case.expected", _lines(res.findings))


@pytest.mark.parametrize("code", CODES)
def test_must_not_trigger(code):
    src = (FIXTURES / code / "notrigger.py").read_text(encoding="utf-8")
    res = scan_source(src, select=_select(code))
    assert res.error is None
    assert [(f.line, f.code, f.message) for f in res.findings] == []


FIX_CODES = [r.code for r in catalog.rules() if r.fix != "none"]


def _fix_input(code: str) -> str:
    d = FIXTURES / code
    return ((d / "case.in.py") if (d / "case.in.py").exists() else (d / "case.py")).read_text(encoding="utf-8")


@pytest.mark.parametrize("code", FIX_CODES)
def test_fix_golden(code):
    src = _fix_input(code)
    out = fix_source(src, select=[code], unsafe=True)
    ast.parse(out)
    check_golden(FIXTURES / code / "case.out.py", out)
    assert out != src, f"{code}: nothing was fixed"
    assert fix_source(out, select=[code], unsafe=True) == out, f"{code}: fixing twice differs from fixing once"
    left = [f for f in scan_source(out, select=[code]).findings if f.fixable]
    assert left == [], f"{code}: fixable findings remain after the fix: {left}"


def test_fixes_only_use_public_torchport_names():
    """Every ``torchport.<name>`` a fix writes must exist in the public API (``torchport.__all__``)."""
    import torchport

    used = set()
    for out in FIXTURES.glob("*/case.out.py"):
        for node in ast.walk(ast.parse(out.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torchport":
                used.add(node.attr)
    assert used >= {"device", "current", "synchronize", "wrap_ddp"}
    missing = sorted(n for n in used if n not in torchport.__all__)
    assert not missing, f"fixes write torchport.{missing} but torchport does not export them"
