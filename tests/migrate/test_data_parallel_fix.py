"""TP303: `model = nn.DataParallel(model)` fixed to `torchport.wrap_ddp(model)` where the structure allows.

The behaviour test trains a single-process DataParallel script and its fixed copy on the CPU and compares
every loss and the saved weights bitwise (one process: DDP is not used, the model itself trains, as
DataParallel does on one device).
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
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
if torch.cuda.is_available():
    model = model.cuda()
model = nn.DataParallel(model)
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
saved = model.module.state_dict()
"""


def _fix(src: str, unsafe: bool = False) -> str:
    return fix_source(textwrap.dedent(src), unsafe=unsafe)


def _tp303(src: str) -> list:
    return [f for f in scan_source(textwrap.dedent(src)).findings if f.code == "TP303"]


def test_single_process_data_parallel_fixed_to_wrap_ddp_trains_the_same():
    fixed = _fix(SCRIPT)
    assert "model = torchport.wrap_ddp(model)\n" in fixed, fixed
    assert 'saved = getattr(model, "module", model).state_dict()' in fixed, fixed
    assert "DataParallel" not in fixed and _fix(fixed) == fixed
    before, after = exec_on_cpu(SCRIPT), exec_on_cpu(fixed)
    assert before["losses"] == after["losses"]
    assert before["saved"].keys() == after["saved"].keys()
    for k in before["saved"]:
        assert torch.equal(before["saved"][k], after["saved"][k]), k


def test_device_ids_and_output_device_are_dropped():
    out = _fix("import torch\nnet = torch.nn.DataParallel(net, device_ids=[0, 1], output_device=0)\n")
    assert "net = torchport.wrap_ddp(net)" in out, out


def test_module_read_on_another_name_is_reported_not_fixed():
    src = """\
    import torch.nn as nn
    model = nn.DataParallel(model)
    def save(net):
        return net.module.state_dict()
    """
    assert "DataParallel" in _fix(src)
    [finding] = _tp303(src)
    assert finding.fix_safety == "none" and "`.module` is also read on net" in finding.message


def test_data_parallel_not_assigned_to_a_name_is_reported():
    src = "import torch.nn as nn\ntrain(nn.DataParallel(model))\n"
    assert "DataParallel" in _fix(src)
    assert "not assigned to a name" in _tp303(src)[0].message


def test_strict_false_loading_makes_the_fix_unsafe():
    """Unprefixed keys vs DataParallel's `module.`: with strict=False a checkpoint would silently not load."""
    src = "import torch.nn as nn\nmodel = nn.DataParallel(model)\nmodel.load_state_dict(sd, strict=False)\n"
    assert "DataParallel" in _fix(src)
    assert "torchport.wrap_ddp(model)" in _fix(src, unsafe=True)
    assert {f.fix_safety for f in _tp303(src)} == {"unsafe"}


def test_a_wrapper_moved_in_the_same_expression_is_fixed():
    """pytorch/examples imagenet: `model = torch.nn.DataParallel(model).cuda()`."""
    out = _fix("import torch\nmodel = torch.nn.DataParallel(model).cuda()\nsd = model.module.state_dict()\n")
    assert "model = torchport.wrap_ddp(model).to(torchport.device())" in out, out
    assert 'sd = getattr(model, "module", model).state_dict()' in out, out


def test_two_wrapped_models_each_keep_their_module_reads():
    """GAN scripts wrap G and D and save both `.module` state dicts: each read belongs to one of the fixes."""
    out = _fix("""\
    import torch.nn as nn
    netG = nn.DataParallel(netG)
    netD = nn.DataParallel(netD)
    state = {"G": netG.module.state_dict(), "D": netD.module.state_dict()}
    """)
    assert "netG = torchport.wrap_ddp(netG)\nnetD = torchport.wrap_ddp(netD)\n" in out, out
    assert '{"G": getattr(netG, "module", netG).state_dict(), "D": getattr(netD, "module", netD).state_dict()}' in out


def test_emit_torch_writes_ddp_or_the_model_with_torch_only():
    fixed = fix_source(SCRIPT, emit="torch")
    assert ("model = (torch.nn.parallel.DistributedDataParallel(model) if torch.distributed.is_initialized() "
            "else model)\n") in fixed, fixed
    assert "torchport" not in fixed
    before, after = exec_on_cpu(SCRIPT), exec_on_cpu(fixed)
    assert before["losses"] == after["losses"]
