"""Fixes that used to run without error but change what the script does (issue 22).

Each test re-creates one idiom from third-party training code, fixes it, and checks the
fixed code keeps the original's behaviour -- by running the relevant line where that is
cheap on the CPU, else by the exact rewrite.
"""

from __future__ import annotations

import textwrap
import types

import pytest
import torch

from migrate_helpers import exec_on_cpu
from torchport.migrate import fix_source, scan_source


def _fix(src: str, unsafe: bool = False) -> str:
    return fix_source(textwrap.dedent(src), unsafe=unsafe)


def test_autocast_mps_guard_keeps_the_device_type():
    """`device.type if device.type != 'mps' else 'cpu'` (pytorch/examples style) must still name the
    device: rewriting 'mps' to the selected type made the guard pick 'cpu' on every accelerator."""
    src = """\
    import torch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with torch.autocast(device.type if device.type != 'mps' else 'cpu'):
        pass
    """
    out = _fix(src)
    assert "device.type if device.type != 'mps' else 'cpu'" in out, out
    # run the guard as fixed with a CUDA-like device: AMP stays on that device type
    guard = next(line for line in out.splitlines() if "autocast(" in line).strip()
    expr = guard[len("with torch.autocast("):-len("):")]
    for device_type in ("cuda", "npu", "cpu"):
        assert eval(expr, {"device": types.SimpleNamespace(type=device_type)}) == device_type


def test_if_elif_on_device_types_is_left_as_is():
    """`== 'cuda'` ... `elif == 'npu'` already dispatches per backend: both tests used to become the
    same comparison, leaving the npu branch dead."""
    src = """\
    import torch
    def step(device):
        if device.type == 'cuda':
            return 1
        elif device.type == 'npu':
            return 2
        return 3
    """
    out = _fix(src)
    assert "device.type == 'cuda'" in out and "device.type == 'npu'" in out, out
    namespace: dict = {}
    exec(compile(out, "fixed.py", "exec"), namespace)
    assert [namespace["step"](types.SimpleNamespace(type=t)) for t in ("cuda", "npu", "cpu")] == [1, 2, 3]


def test_single_cuda_guard_is_still_rewritten():
    """The dispatch exemption is narrow: a lone `x.device.type == "cuda"` guard is still ported."""
    out = _fix('import torch\nif x.device.type == "cuda":\n    torch.cuda.synchronize()\n')
    assert '"cuda"' not in out and "torchport.current().type" in out, out


def test_spawn_worker_keeps_its_device_index():
    """An mp.spawn worker: set_device(gpu) + .cuda() + DDP(device_ids=[gpu]). The fix used to drop the
    index (wrap_ddp picked device 0) and ignore set_device; now the index is selected once and the
    DDP rewrite is safe because it passes exactly that index."""
    src = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def worker(gpu, args):
        torch.cuda.set_device(gpu)
        model = torch.nn.Linear(2, 2).cuda()
        model = DistributedDataParallel(model, device_ids=[gpu])
    """
    findings = {f.code: f for f in scan_source(textwrap.dedent(src)).findings}
    assert findings["TP302"].fix_safety == "safe" and findings["TP112"].fix_safety == "safe"
    out = _fix(src)
    assert "torchport.select_device(index=gpu)" in out, out
    assert out.index("select_device(index=gpu)") < out.index("torchport.wrap_ddp(model)")


@pytest.mark.emulated_npu(devices=2)
def test_select_device_index_is_the_current_device(emulated_npu):
    """What the fixed worker relies on: select_device(index=i) makes device i the one torchport hands out
    (to .to(), wrap_ddp) and the backend module's current device (streams, collectives)."""
    import torchport
    from torchport.runtime.device import reset_selection

    try:
        t = torchport.select_device("npu", index=1, warn=False)
        assert str(torchport.device()) == "npu:1" and t.index == 1
        assert t.module.current_device() == 1
    finally:
        torchport.current().module.set_device(0)
        reset_selection()


def test_map_location_npu_becomes_the_selected_device(tmp_path):
    """`torch.load(path, map_location="npu:0")` was fixed to f"{type}:0", which is "cpu:0" on a CPU host
    (torch cannot restore storages tagged cpu:0); it must become the device object."""
    out = _fix('import torch\nstate = torch.load(path, map_location="npu:0")\n')
    assert "map_location=torchport.device()" in out, out
    ckpt = tmp_path / "ckpt.pt"
    torch.save({"w": torch.ones(2)}, ckpt)
    namespace = exec_on_cpu(out, {"path": str(ckpt)})
    assert torch.equal(namespace["state"]["w"], torch.ones(2))


def test_legacy_tensor_alias_is_fixed():
    """`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` (PyTorch-GAN) was report-only."""
    out = _fix("import torch\ncuda = torch.cuda.is_available()\n"
               "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n")
    assert "Tensor = torchport.current().module.FloatTensor if cuda else torch.FloatTensor" in out, out
    left = [f.code for f in scan_source(out).findings]
    assert "TP106" not in left, left


def test_legacy_tensor_alias_statements_are_fixed_and_run_on_the_cpu():
    """The statement forms of the alias (PyTorch-GAN clustergan: `Tensor = torch.cuda.FloatTensor` alone in
    `sample_z`; `if cuda: Tensor = torch.cuda.FloatTensor / else: Tensor = torch.FloatTensor`) were report-only:
    the fixed clustergan still failed with "Found no NVIDIA driver"."""
    src = """\
    import torch
    cuda = True if torch.cuda.is_available() else False
    if cuda:
        Tensor = torch.cuda.FloatTensor
    else:
        Tensor = torch.FloatTensor
    def sample_z(shape):
        Tensor = torch.cuda.FloatTensor
        return Tensor(shape, 3).fill_(0)
    z = sample_z(2)
    """
    out = _fix(src)
    assert "    Tensor = torchport.current().module.FloatTensor\nelse:\n    Tensor = torch.FloatTensor" in out, out
    assert ("Tensor = torchport.current().module.FloatTensor if torchport.current().is_accelerator "
            "else torch.FloatTensor") in out, out
    assert "TP106" not in [f.code for f in scan_source(out).findings]
    assert _fix(out) == out  # fixing twice changes nothing
    namespace = exec_on_cpu(out)
    assert namespace["Tensor"] is torch.FloatTensor
    assert namespace["z"].dtype == torch.float32 and namespace["z"].device.type == "cpu"


def test_a_legacy_type_assigned_in_an_if_without_the_cpu_branch_gets_the_guarded_form():
    """Only an `else` that assigns the CPU type makes the branch form sound; any other `if` body gets the guard."""
    out = _fix("import torch\nif flag:\n    Tensor = torch.cuda.LongTensor\nelse:\n    Tensor = torch.FloatTensor\n")
    assert ("Tensor = torchport.current().module.LongTensor if torchport.current().is_accelerator "
            "else torch.LongTensor") in out, out


def test_a_backend_guard_in_a_cuda_file_is_still_left_alone_when_fixing_the_fixed_file():
    """Fix is idempotent: after the first pass removes every ``cuda`` from the file, the second pass
    must take the same decision about ``device_type == "xpu"`` (seen on torch's own inductor code)."""
    from torchport.migrate import fix_source

    source = textwrap.dedent('''\
        import torch
        def f(x, device_type):
            if device_type == "xpu":
                return x
            return x.cuda()
        ''')
    once = fix_source(source, unsafe=True)
    assert 'device_type == "xpu"' in once and ".cuda()" not in once
    assert fix_source(once, unsafe=True) == once
