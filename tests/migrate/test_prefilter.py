"""The text prefilter tries a needle pattern only where its literal head occurs: the same answer as one regular
expression over the needles and patterns, on every fixture and on timm's sources."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from torchport.migrate import catalog
from torchport.migrate.ruleset import Prefilter, _literal_head

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate"


@pytest.mark.parametrize("pattern, head", [
    (r"\.to\(\s*\d", ".to("), (r"device\s*=\s*\d", "device"), (r"ab?c", "a"), (r"abc+", "ab"), (r"x{2}y", ""),
    (r"a|b", ""), (r"\bx", ""), (r"[ab]c", ""), (r"(?i)cuda", ""), (r"\.?x", ""), (r"foo\|bar", ""),
])
def test_literal_head(pattern, head):
    assert _literal_head(pattern) == head


def _texts() -> list[str]:
    files = sorted(FIXTURES.rglob("*.py"))
    spec = importlib.util.find_spec("timm")
    assert spec is not None and spec.origin, "timm is a dev dependency; it must be installed"
    files += sorted(Path(spec.origin).parent.rglob("*.py"))
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


def test_same_answer_as_one_regular_expression():
    pf = catalog.ruleset((), ()).prefilter
    patterns = [p.pattern for _, p in pf.patterns]
    assert any(head for head, _ in pf.patterns), "no pattern has a literal head: the test compares nothing new"
    one = re.compile("|".join([re.escape(n) for n in pf.needles] + patterns))
    # the needles alone and the patterns alone, so a pattern hit is not hidden behind a needle hit
    only = Prefilter([], patterns)
    one_only = re.compile("|".join(patterns))
    texts = _texts() + ["x.to( 3)", "model.to(\n  0)", "torch.device (1)", "device=2", "nothing here"]
    assert len(texts) > 400
    assert [pf.search(t) is not None for t in texts] == [one.search(t) is not None for t in texts]
    got = [only.search(t) is not None for t in texts]
    assert got == [one_only.search(t) is not None for t in texts] and any(got)
