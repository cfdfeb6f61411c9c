"""TP303: `nn.DataParallel(model)` fixed to `torchport.compat.DataParallel(model)` -- the whole saved state kept.

`torch.nn.DataParallel` where the backend runs it, elsewhere the one-device DataParallel `torchport run` builds: the
same type, `.module`, and the `module.`-prefixed `state_dict` keys, so a checkpoint written by the original loads
strictly into the fixed script and the other way round. (The earlier fix, `torchport.wrap_ddp(model)`, returned the
bare model in one process: every key lost its prefix and `.module` its target.)
"""

from __future__ import annotations

import textwrap

import torch

from migrate_helpers import exec_on_cpu
from torchport.migrate import fix_source, scan_source

SCRIPT = """\
import io
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
if torch.cuda.is_available():
    net = net.cuda()
model = nn.DataParallel(net)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
losses = []
for step in range(5):
    x = torch.randn(32, 8)
    y = torch.randint(0, 3, (32,))
    loss = nn.functional.cross_entropy(model(x), y)
    losses.append(loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
saved = model.state_dict()
inner = model.module.state_dict()
kind = type(model).__name__
"""


def _fix(src: str, unsafe: bool = False, emit: str = "torchport") -> str:
    return fix_source(textwrap.dedent(src), unsafe=unsafe, emit=emit)


def _tp303(src: str) -> list:
    return [f for f in scan_source(textwrap.dedent(src)).findings if f.code == "TP303"]


def test_fixed_data_parallel_trains_and_saves_like_the_original():
    fixed = _fix(SCRIPT)
    assert "model = torchport.compat.DataParallel(net)\n" in fixed, fixed
    assert "saved = model.state_dict()\ninner = model.module.state_dict()\n" in fixed  # `.module` untouched
    assert _fix(fixed) == fixed
    before, after = exec_on_cpu(SCRIPT), exec_on_cpu(fixed)
    assert before["losses"] == after["losses"]
    assert after["kind"] == before["kind"] == "DataParallel"
    for name in ("saved", "inner"):
        assert list(before[name]) == list(after[name]), name   # `module.0.weight` ... in the same order
        for k in before[name]:
            assert torch.equal(before[name][k], after[name][k]), (name, k)
    assert all(k.startswith("module.") for k in after["saved"])


def test_checkpoints_load_strictly_both_ways():
    """The repository's own `module.`-keyed checkpoints (akamaster's shipped `*.th`) load strictly into the fixed
    script, and what the fixed script saves loads strictly into the original's DataParallel."""
    import torchport

    torchport.select_device("cpu", warn=False)
    try:
        torch.manual_seed(1)
        original = torch.nn.DataParallel(torch.nn.Linear(3, 2))   # noqa: TP303 (the reference)
        fixed = torchport.compat.DataParallel(torch.nn.Linear(3, 2))
        fixed.load_state_dict(original.state_dict())              # strict by default
        original.load_state_dict(fixed.state_dict())
        assert torch.equal(fixed.module.weight, original.module.weight)
        assert isinstance(fixed, torch.nn.DataParallel) and fixed.device_ids == []
    finally:
        from torchport.runtime.device import reset_selection

        reset_selection()


def test_arguments_are_kept_and_every_form_is_fixed():
    out = _fix("import torch\nnet = torch.nn.DataParallel(net, device_ids=[0, 1], output_device=0)\n")
    assert "net = torchport.compat.DataParallel(net, device_ids=[0, 1], output_device=0)" in out, out
    chained = _fix("import torch\nmodel = torch.nn.DataParallel(model).cuda()\nsd = model.module.state_dict()\n")
    assert "model = torchport.compat.DataParallel(model).to(torchport.device())" in chained, chained
    assert "sd = model.module.state_dict()" in chained
    # formerly reported: `.module` read on another name, a wrapper not assigned to a name, strict=False loading
    other = _fix("import torch.nn as nn\nmodel = nn.DataParallel(model)\ndef save(net):\n"
                 "    return net.module.state_dict()\n")
    assert "model = torchport.compat.DataParallel(model)" in other and "net.module.state_dict()" in other
    assert "train(torchport.compat.DataParallel(model))" in _fix("import torch.nn as nn\ntrain(nn.DataParallel(model))\n")
    src = "import torch.nn as nn\nmodel = nn.DataParallel(model)\nmodel.load_state_dict(sd, strict=False)\n"
    assert {f.fix_safety for f in _tp303(src)} == {"safe"}


def test_functional_data_parallel_is_reported_only():
    src = "import torch\nout = torch.nn.parallel.data_parallel(module, inputs)\n"
    [finding] = _tp303(src)
    assert finding.fix_safety == "none" and "data_parallel" in _fix(src)


def test_emit_torch_keeps_the_runtime_call_and_says_so():
    """torch has no one-device DataParallel for a backend without DataParallel: `--emit torch` falls back to
    torchport.compat, and the finding says it does."""
    fixed = _fix(SCRIPT, emit="torch")
    assert "model = torchport.compat.DataParallel(net)\n" in fixed, fixed
    from torchport.migrate.runner import Options, analyze_text

    res = analyze_text(SCRIPT, "s.py", Options(emit="torch"))
    [finding] = [f for f in res.findings if f.code == "TP303"]
    assert "--emit torch" in finding.message and "torchport.compat" in finding.message
    before, after = exec_on_cpu(SCRIPT), exec_on_cpu(fixed)
    assert before["losses"] == after["losses"] and list(before["saved"]) == list(after["saved"])
