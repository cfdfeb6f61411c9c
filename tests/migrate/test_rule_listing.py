"""What `torchport rules` lists as a rule's fix safety agrees with what its fixes do.

Listed ``safe``: some finding of the rule is fixed by a plain ``fix --write``. Listed ``unsafe``: none is (each
fix needs ``--unsafe-fixes``). Listed ``none``: no finding carries a fix. Checked on every rule's own fixture.
"""

from __future__ import annotations

import pytest

from migrate_helpers import FIXTURES
from torchport.migrate import catalog, scan_source


@pytest.mark.parametrize("rule", catalog.rules(), ids=lambda r: r.code)
def test_listed_fix_safety_matches_the_fixes(rule):
    src = (FIXTURES / rule.code / "case.py").read_text(encoding="utf-8")
    default = [r.code for r in catalog.rules() if r.default_enabled]
    seen = {f.fix_safety for f in scan_source(src, select=sorted({*default, rule.code})).findings if f.code == rule.code}
    assert seen, f"{rule.code} does not fire on its case.py"
    if rule.fix == "safe":
        assert "safe" in seen, f"{rule.code} is listed safe, but no finding of its case.py has a safe fix: {seen}"
    elif rule.fix == "unsafe":
        assert "safe" not in seen and "unsafe" in seen, f"{rule.code} is listed unsafe, but its fixes are {seen}"
    else:
        assert seen == {"none"}, f"{rule.code} is listed without a fix, but its findings carry {seen}"
