"""Both sides of ``torch.cuda.is_available()`` under the shim.

* the idiom ``"cuda" if torch.cuda.is_available() else "cpu"`` in user code lands on the
  accelerator (else: the silent CPU run);
* an installed library that checks CUDA availability to pick a CUDA-only kernel keeps
  taking its portable path (else: accelerate#3020, the transfer_to_npu harm).

The accelerator here is a pretend one (computes on CPU) so both sides run anywhere;
test_emulated_npu.py repeats the idiom on the emulated npu.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

import torchport.shim as shim
from shim_helpers import install_fake_library
from torchport.shim._callers import CallerClassifier

LIBRARY = textwrap.dedent('''
    """A stand-in for a third-party package with a CUDA-only fast path (like bitsandbytes / flash-attn users)."""
    import torch

    def cuda_available():
        return torch.cuda.is_available()

    def device_count():
        return torch.cuda.device_count()

    def fused_scale(x, k):
        if torch.cuda.is_available():
            # CUDA-only kernel: would need a real CUDA tensor and the CUDA runtime.
            if not x.is_cuda:
                raise RuntimeError("fastkern: CUDA kernel called with a non-CUDA tensor")
            torch.cuda.current_stream().synchronize()
            return x * k
        return x * k                      # portable path
''')


@pytest.fixture
def fastkern(tmp_path, monkeypatch):
    """Import a fake library from a ``site-packages`` directory, as pip would install it."""
    return install_fake_library(tmp_path, monkeypatch, "fastkern", LIBRARY)


def test_idiom_lands_on_the_accelerator(pretend_accelerator):
    s = shim.install(pretend_accelerator)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert device == "cuda"  # user code sees the accelerator...
    x = torch.ones(3).to(device)
    assert x.device == torch.device("cpu")  # ...and "cuda" means the selected device (cpu-backed here)
    assert torch.cuda.device_count() == 1
    assert s.report.records["torch.cuda.is_available"].example == "is_available() -> True"
    assert s.report.records["torch.Tensor.to"].count == 1


def test_library_keeps_its_portable_path(pretend_accelerator, fastkern):
    shim.install(pretend_accelerator)
    x = torch.ones(3).cuda()
    assert torch.cuda.is_available() is True
    assert fastkern.cuda_available() is False  # the real answer: there is no CUDA here
    assert fastkern.device_count() == 0
    assert fastkern.fused_scale(x, 2.0).tolist() == [2.0, 2.0, 2.0]


def test_without_caller_awareness_the_library_breaks(pretend_accelerator, fastkern):
    """The harm the design avoids: answer True to everyone and the library takes its CUDA-only path."""
    s = shim.install(pretend_accelerator)
    s.classifier.add_user_path(fastkern.__file__)  # treat the library as user code, as transfer_to_npu does
    assert fastkern.cuda_available() is True
    # its CUDA-only branch runs (is_cuda now says "on the selected device" to it too) and fails there
    with pytest.raises((RuntimeError, AttributeError), match="CUDA kernel|has no attribute 'synchronize'"):
        fastkern.fused_scale(torch.ones(3).cuda(), 2.0)


def test_torch_itself_gets_real_answers(pretend_accelerator):
    shim.install(pretend_accelerator)
    assert torch.cuda.is_available() is True
    # torch's own availability checks keep telling the truth, so torch takes no CUDA path either (a call
    # compiled as torch's own grad_scaler.py, where torch asks it); user code gets the selected device's answer.
    ns = {"f": torch.cuda.amp.common.amp_definitely_not_available}
    exec(compile("answer = f()", torch.amp.grad_scaler.__file__, "exec"), ns)
    assert ns["answer"] is True
    assert torch.cuda.amp.common.amp_definitely_not_available() is False
    assert torch._utils._get_available_device_type() != "cuda"
    torch.manual_seed(0)  # torch.manual_seed calls torch.cuda.manual_seed_all internally: must reach the real one
    assert torch.initial_seed() == 0


def test_classifier():
    import os
    import sysconfig

    c = CallerClassifier(user_paths=["/opt/site-packages/mine"])
    assert c.is_user_file(__file__)
    assert not c.is_user_file(torch.__file__)
    assert not c.is_user_file(os.__file__)
    assert not c.is_user_file(os.path.join(sysconfig.get_paths()["purelib"], "x", "y.py"))
    assert not c.is_user_file("/somewhere/else/site-packages/lib/mod.py")
    assert not c.is_user_file("/usr/lib/python3/dist-packages/lib/mod.py")
    assert c.is_user_file("/opt/site-packages/mine/train.py")  # explicit user path wins
    assert c.is_user_file("<stdin>") and c.is_user_file("<string>")
    assert not c.is_user_file("<frozen runpy>")
    import torchport

    assert not c.is_user_file(torchport.__file__)


def test_library_only_calls_are_marked_in_the_report(pretend_accelerator, fastkern, tmp_path):
    """A redirect triggered with no user frame on the stack is reported as a library call site."""
    s = shim.install(pretend_accelerator)
    lib = tmp_path / "venv" / "lib" / "site-packages" / "fastkern" / "mover.py"
    lib.write_text("def move(t):\n    return t.to('cuda')\n")
    import fastkern.mover as mover

    import threading

    worker = threading.Thread(target=mover.move, args=(torch.ones(1),))  # a stack with only library frames
    worker.start()
    worker.join()
    site = s.report.records["torch.Tensor.to"].first_call_site
    assert site.endswith("(library)") and "mover.py:2" in site


IS_CUDA_LIBRARY = textwrap.dedent('''
    def on_cuda(x):
        return x.is_cuda
''')


def test_is_cuda_means_the_selected_device_for_user_code_only(pretend_accelerator, tmp_path, monkeypatch):
    """One meaning for ``is_cuda`` in the shim and the fixer: "on the device CUDA code is redirected to"."""
    lib = install_fake_library(tmp_path, monkeypatch, "iscudalib", IS_CUDA_LIBRARY)
    assert "is_cuda" not in vars(torch.Tensor)
    s = shim.install(pretend_accelerator)
    x = torch.ones(2).cuda()
    assert x.is_cuda is True                 # user code: the tensor is on the selected device
    assert lib.on_cuda(x) is False           # a library reads the real attribute
    assert torch.ones(2, device="meta").is_cuda is False
    assert s.report.records["torch.Tensor.is_cuda"].count == 1
    shim.uninstall()
    assert "is_cuda" not in vars(torch.Tensor)  # restored: the inherited descriptor again
    assert torch.ones(2).is_cuda is False
