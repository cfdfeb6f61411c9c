"""The per-rule contract (issue 30): for every rule, a file fixed with `torchport fix --unsafe-fixes` does what the
original does under `torchport run`, on the CPU and on the emulated npu -- printed output, exceptions, module-level
values, `torch.save` objects, files written, random draws (tools/rule_contract.py; cases in tests/migrate/contract/).

One harness run (four interpreters: run and fix, on each device, every case in turn) serves every test here.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from migrate_helpers import REPO
from torchport.migrate import catalog
from torchport.migrate.rules.base import OUTCOMES

_spec = importlib.util.spec_from_file_location("rule_contract", REPO / "tools" / "rule_contract.py")
contract = importlib.util.module_from_spec(_spec)
sys.modules["rule_contract"] = contract
_spec.loader.exec_module(contract)


@pytest.fixture(scope="module")
def results():
    return {r.case: r for r in contract.check(devices=("cpu", "npu"))}


def test_every_rule_has_a_contract_case():
    cases = {p.stem.split("_")[0] for p in contract.CASES.glob("TP*.py")}
    codes = {r.code for r in catalog.rules()}
    assert codes == cases, f"rules without a case: {codes - cases}; cases without a rule: {cases - codes}"


@pytest.mark.slow
def test_fixed_files_never_do_worse_than_run(results):
    broken = {name: r.verdict for name, r in results.items() if not r.passed}
    assert not broken, broken
    # the report-only cases the issue named: each crashed after fix while `run` worked
    for name, device in (("TP112", "npu"), ("TP114", "cpu"), ("TP605_mps", "npu")):
        assert results[name].errors[f"fix {device}"] is None, (name, results[name].errors)
    assert results["TP303"].errors["fix npu"] is None        # module.-keyed checkpoint loaded strictly
    assert results["TP502"].errors["fix cpu"] is None        # a GPU-saved checkpoint loaded as run loads it


@pytest.mark.slow
def test_each_rule_declares_the_outcome_its_case_shows(results):
    """A rule's `after_fix` names the classes its fixed case shows: reported-only findings left in the fixed
    file only where the rule says "reported only", a `torchport.compat` call only where it says "redirected"."""
    rules = {r.code: r for r in catalog.rules()}
    for name, r in results.items():
        declared = rules[r.rule].after_fix
        assert declared.startswith(OUTCOMES), (r.rule, declared)
        assert r.outcome in declared, (name, r.outcome, declared)
