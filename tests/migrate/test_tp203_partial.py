"""TP203 on ``functools.partial(torch.autocast, ...)``: rewritten only where the rewrite keeps every later call's
meaning, and left alone where the call form is left alone (a type-choosing expression, an autocast-off region)."""

from __future__ import annotations

import functools

import pytest
import torch

import torchport
from torchport.migrate import fix_source, scan_source

HEAD = "import functools\nimport torch\nd = torch.device('cpu')\n"


@pytest.mark.parametrize("line", [
    "a = functools.partial(torch.autocast, device_type=d.type if d.type != 'cuda' else 'cpu', dtype=torch.float16)\n",
    "a = functools.partial(torch.autocast, device_type=d.type, enabled=False)\n",
])
def test_forms_the_call_rule_leaves_alone_are_left_alone_in_a_partial(line):
    assert "torchport.autocast" not in fix_source(HEAD + line, select=["TP203"])


def test_a_partial_binding_more_than_the_device_type_positionally_is_reported_without_a_fix():
    src = HEAD + "a = functools.partial(torch.autocast, d.type, torch.float16)\n"
    [finding] = [f for f in scan_source(src, select=["TP203"]).findings]
    assert finding.fix_safety == "none" and "positionally" in finding.message
    assert fix_source(src, select=["TP203"]) == src
    # why: the later call's positional argument continues torch's order (enabled), which a rewrite would shift
    assert functools.partial(torch.autocast, "cpu", torch.bfloat16)(False).fast_dtype == torch.bfloat16


def test_a_partial_binding_only_the_device_type_keeps_later_positional_arguments():
    src = HEAD + "a = functools.partial(torch.autocast, d.type)\n"
    fixed = fix_source(src, select=["TP203"])
    assert "functools.partial(torchport.autocast, device_type=d.type)" in fixed
    # torch's order after the device type (dtype, enabled, cache_enabled) is torchport.autocast's own
    ns: dict = {}
    exec(compile(fixed, "<fixed>", "exec"), ns)
    with ns["a"](torch.bfloat16, False):
        assert not torch.is_autocast_enabled("cpu")
    assert torchport.autocast.__code__.co_varnames[:3] == ("dtype", "enabled", "cache_enabled")
