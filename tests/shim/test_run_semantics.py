"""`torchport run` answers as the fixed code does (issue 22): the CPU fallback's device count, keyword
stream arguments, the legacy typed constructors, and libraries validating a user's ``--device cuda``."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import torch

import torchport.shim as shim
from shim_helpers import install_fake_library, run_cli

TIMM_LIKE = textwrap.dedent('''
    """Re-creates timm.utils.distributed.init_distributed_device: validates and applies the user's device."""
    import torch

    def init_distributed_device(device):
        device_type, *device_idx = device.split(":", maxsplit=1)
        if device_type == "cuda":
            assert torch.cuda.is_available(), f"CUDA is not available but {device} was specified."
        if device.startswith("cuda:"):
            torch.cuda.set_device(device)
        return device

    def has_cuda_kernels():
        return torch.cuda.is_available()   # the library deciding for itself: the real answer
''')


@pytest.fixture
def timm_like(tmp_path, monkeypatch):
    return install_fake_library(tmp_path, monkeypatch, "timm_like", TIMM_LIKE)


def test_cpu_fallback_counts_one_device():
    shim.install("cpu")
    assert torch.cuda.is_available() is False
    assert torch.cuda.device_count() == 1


# the target fixture asks for emulated_npu at run time: the marker tells the plugin to prepare the emulator
# before the first test of the session (torch sizes its autograd device queues at the first backward)
pytestmark = pytest.mark.emulated_npu()


@pytest.fixture(params=["cpu", "npu"])
def target(request):
    """The CPU fallback and the emulated npu (an accelerator with its own streams and legacy types)."""
    if request.param == "npu":
        request.getfixturevalue("emulated_npu")
    return request.param


def test_stream_context_takes_the_keyword(target):
    shim.install(target)
    s = torch.cuda.Stream()
    with torch.cuda.stream(stream=s):
        y = torch.ones(2) * 2
    with torch.cuda.stream(s):
        pass
    assert y.sum().item() == 4


def test_legacy_cuda_types_build_and_convert_on_the_selected_device(target):
    shim.install(target)
    Tensor = torch.cuda.FloatTensor
    assert Tensor(4, 1).fill_(1.0).sum().item() == 4 and Tensor(4, 1).device.type == target
    z = Tensor(np.random.normal(0, 1, (2, 3)))
    assert (z.dtype, tuple(z.shape)) == (torch.float32, (2, 3))
    imgs = torch.ones(2, dtype=torch.float64)
    for spelling in (torch.cuda.FloatTensor, "torch.cuda.FloatTensor"):
        out = imgs.type(spelling)
        assert (out.dtype, out.device.type) == (torch.float32, target)
    assert z.device.type == target and torch.cuda.LongTensor([1, 2]).dtype == torch.int64
    assert imgs.type() == "torch.DoubleTensor" and imgs.type(torch.float16).dtype == torch.float16


def test_library_validating_the_users_cuda_device_passes(timm_like):
    shim.install("cpu")
    assert timm_like.init_distributed_device("cuda:0") == "cuda:0"
    assert timm_like.init_distributed_device("cuda") == "cuda"
    assert timm_like.has_cuda_kernels() is False  # no CUDA string handed down: the library's own question



def test_library_installed_beside_the_stdlib_validating_cuda_passes():
    """timm installed in site-packages: a virtualenv's (and a plain install's) stdlib folder holds
    site-packages, so the library counted as stdlib and got the real answer (timm's train.py failed
    under `torchport run` with "CUDA is not available but cuda was specified")."""
    import sysconfig

    filename = os.path.join(sysconfig.get_paths()["purelib"], "timm_like_installed", "distributed.py")
    scope: dict = {}
    exec(compile(TIMM_LIKE, filename, "exec"), scope)   # frames carry the installed library's file name
    shim.install("cpu")
    assert scope["init_distributed_device"]("cuda") == "cuda"
    assert scope["has_cuda_kernels"]() is False


SPAWN = textwrap.dedent('''
    import sys
    import torch
    import torch.multiprocessing as mp

    def work(i, out):
        with open(f"{out}/rank{i}.txt", "w") as f:
            f.write(str((torch.ones(2).cuda() * (i + 1)).sum().item()))

    if __name__ == "__main__":
        n = torch.cuda.device_count()
        mp.spawn(work, args=(sys.argv[1],), nprocs=n)
        print("ranks", n)
''')


def test_spawn_over_device_count_trains_one_rank_on_cpu(tmp_path):
    """`mp.spawn(nprocs=torch.cuda.device_count())` spawned nothing on the CPU fallback and exited 0."""
    script = tmp_path / "spawn_ddp.py"
    script.write_text(SPAWN)
    res = run_cli(["run", "--device", "cpu", str(script), str(tmp_path)], timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "ranks 1" in res.stdout
    assert (tmp_path / "rank0.txt").read_text() == "2.0"
