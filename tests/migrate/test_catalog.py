"""The rule catalog: distinct codes and names, documented ranges, selection, docs in sync."""

from __future__ import annotations

import ast

import pytest
from typer.testing import CliRunner

from migrate_helpers import REPO
from torchport.cli.main import app
from torchport.migrate import catalog, fix_source, scan_source
from torchport.migrate.docs import rule_page, write_docs
from torchport.migrate.rules.base import CODE_RANGES, KEBAB, Rule


def test_codes_and_names_are_distinct_and_well_formed():
    rules = catalog.rules()
    codes = [r.code for r in rules]
    names = [r.name for r in rules]
    assert len(codes) == len(set(codes)), "duplicate rule codes"
    assert len(names) == len(set(names)), "duplicate rule names"
    for r in rules:
        assert r.code[2] in CODE_RANGES, r.code
        assert KEBAB.match(r.name), r.name
        assert r.severity in ("error", "warning", "info") and r.fix in ("safe", "unsafe", "none")
        assert r.default_enabled == (r.code[2] != "9"), f"{r.code}: only TP9xx rules are off by default"
        assert r.summary and r.why and r.example and r.use_instead and r.fix_notes, f"{r.code}: missing docs"


def test_a_rule_outside_the_ranges_is_refused():
    with pytest.raises(ValueError, match="documented range"):
        type("Bad", (Rule,), {"code": "TP701", "name": "bad-rule"})
    with pytest.raises(ValueError, match="kebab-case"):
        type("Bad", (Rule,), {"code": "TP198", "name": "Bad_Rule"})
    with pytest.raises(ValueError, match="off by default"):
        type("Bad", (Rule,), {"code": "TP997", "name": "noisy", "default_enabled": True})


def test_selection_by_prefix_name_and_ignore():
    default = {r.code for r in catalog.select()}
    assert "TP101" in default and not any(c.startswith("TP9") for c in default)
    assert {r.code for r in catalog.select(["TP2"])} == {r.code for r in catalog.rules() if r.code.startswith("TP2")}
    assert [r.code for r in catalog.select(["cuda-method"])] == ["TP101"]
    assert "TP210" not in {r.code for r in catalog.select(["TP2"], ["TP210"])}
    assert {r.code for r in catalog.select(["ALL"])} == {r.code for r in catalog.rules()}
    with pytest.raises(catalog.UnknownRuleError, match="Did you mean"):
        catalog.select(["TP1O1"])


def test_ignore_applies_to_findings_but_claims_still_hold():
    src = 'import torch\nd = torch.device("cuda")\n'
    assert [f.code for f in scan_source(src).findings] == ["TP102"]
    # TP102 ignored: the literal it owns is not re-reported by the generic string rule
    assert scan_source(src, ignore=["TP102"]).findings == []


@pytest.mark.parametrize("rule", catalog.rules(), ids=lambda r: r.code)
def test_doc_example_triggers_and_use_instead_is_the_fix(rule):
    """Each page's example fires its rule; for fixable rules the fix of the example is
    exactly the page's "use instead" (so the docs cannot drift from the code)."""
    res = scan_source(rule.example, select=[rule.code])
    assert rule.code in {f.code for f in res.findings}, f"{rule.code}: its doc example does not trigger it"
    ast.parse(rule.use_instead)
    if rule.fix != "none":
        assert fix_source(rule.example, select=[rule.code], unsafe=True) == rule.use_instead


def test_docs_pages_are_in_sync(tmp_path):
    written = write_docs(tmp_path)
    committed = REPO / "docs" / "rules"
    for page in written:
        target = committed / page.name
        assert target.exists(), f"{target} is missing: run `torchport rules --docs docs/rules`"
        assert target.read_text(encoding="utf-8") == page.read_text(encoding="utf-8"), (
            f"{target} is stale: run `torchport rules --docs docs/rules`")
    extra = {p.name for p in committed.glob("*.md")} - {p.name for p in written}
    assert not extra, f"pages without a rule: {extra}"


def test_rules_and_explain_commands(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["rules", "--json", str(tmp_path / "rules.json")])
    assert res.exit_code == 0 and "TP101" in res.output and "cuda-method" in res.output
    assert (tmp_path / "rules.json").read_text().count('"code"') == len(catalog.rules())
    res = runner.invoke(app, ["explain", "TP201"])
    assert res.exit_code == 0
    assert res.output == rule_page(catalog.get("TP201"))
    for heading in ("What it does", "Why it matters", "Example", "Use instead", "Fix safety"):
        assert heading in res.output
    res = runner.invoke(app, ["explain", "cuda-methd"])
    assert res.exit_code == 2 and "cuda-method" in res.output
