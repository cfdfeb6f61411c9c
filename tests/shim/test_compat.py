"""torchport.compat: the shim's own implementations, callable from a fixed file without installing the shim."""

from __future__ import annotations

import pytest
import torch

import torchport
import torchport.shim as shim
from torchport.runtime.device import reset_selection
from torchport.shim import compat


@pytest.fixture
def on_cpu():
    torchport.select_device("cpu", warn=False)
    yield
    reset_selection()


def test_the_name_list_is_what_the_shim_implements(on_cpu):
    """CUDA_NAMES is torch-free (scan and fix read it without torch): the top-level torch.cuda names the shim
    implements for user code (the CUDA-surface registry's, shim/surface.py)."""
    from torchport.shim._cuda_api import implementations

    implemented = {q[len("torch.cuda."):] for q in implementations() if q.count(".") == 2 and q.startswith("torch.cuda.")}
    assert set(compat.CUDA_NAMES) <= implemented
    assert implemented - set(compat.CUDA_NAMES) <= {"amp"}   # nothing implemented is left out of compat
    assert torchport.compat is compat
    assert set(compat.CUDA_NAMES) <= set(dir(compat))
    with pytest.raises(AttributeError, match="torchport.compat has no.*serves the torch.cuda names"):
        compat.no_such_name  # noqa: B018


def test_answers_are_those_of_the_installed_shim(on_cpu):
    """What `torchport run` answers for `torch.cuda.<name>()` in user code on the CPU, compat answers too."""
    calls = ("memory_summary", "memory_stats", "memory_allocated", "max_memory_reserved", "device_count",
             "current_device", "get_device_capability", "is_bf16_supported", "initial_seed")
    mine = {name: getattr(compat, name)() for name in calls}
    with shim.redirect_cuda("cpu"):
        theirs = {name: getattr(torch.cuda, name)() for name in calls}
    assert mine == theirs
    assert mine["memory_summary"].startswith("(no device memory statistics on cpu")


def test_nothing_is_patched(on_cpu):
    before = {n: vars(torch.cuda).get(n) for n in ("memory_summary", "device", "set_device", "get_rng_state")}
    compat.memory_summary()
    with compat.device(1):
        pass
    compat.get_rng_state()
    assert {n: vars(torch.cuda).get(n) for n in before} == before
    assert shim.active() is None


def test_rng_state_is_the_cpu_generator_on_the_cpu(on_cpu):
    compat.manual_seed_all(5)
    draw = torch.rand(2)
    torch.manual_seed(5)
    assert torch.equal(draw, torch.rand(2))
    state = compat.get_rng_state()
    a = torch.rand(3)
    compat.set_rng_state(state)
    assert torch.equal(a, torch.rand(3))


def test_data_parallel_is_data_parallel_on_one_device(on_cpu):
    model = compat.DataParallel(torch.nn.Linear(3, 2), dim=0)
    assert type(model) is torch.nn.DataParallel and model.device_ids == [] and model.dim == 0
    assert list(model.state_dict()) == ["module.weight", "module.bias"]
    x = torch.randn(4, 3)
    assert torch.equal(model(x), model.module(x))


def test_restore_location_moves_only_cuda_saved_storages(on_cpu, tmp_path):
    """A storage saved on cuda:0 lands where run puts it (the CPU here); a CPU one where torch puts it."""
    from torch import serialization

    entry = (1, lambda obj: "cuda:0" if getattr(obj, "device", None) is not None and obj.device.type == "cpu"
             else None, lambda obj, location: None)
    serialization._package_registry.append(entry)
    serialization._package_registry.sort(key=lambda e: e[0])
    try:
        torch.save({"w": torch.ones(2)}, tmp_path / "gpu.pt")
    finally:
        serialization._package_registry.remove(entry)
    with pytest.raises(RuntimeError, match="CUDA device"):
        torch.load(tmp_path / "gpu.pt")
    state = torch.load(tmp_path / "gpu.pt", map_location=compat.restore_location)
    assert state["w"].device.type == "cpu" and torch.equal(state["w"], torch.ones(2))
    assert compat.restore_location(torch.UntypedStorage(4), "cpu") is None   # torch's default restore


@pytest.mark.emulated_npu(devices=2)
def test_on_the_emulated_npu_devices_follow_torchport_selection(emulated_npu):
    """`with torchport.compat.device(1):` is device 1 for torchport.device() too, and the previous one after."""
    assert torchport.current().backend.device_count() == 2
    with compat.device(1):
        assert torchport.device() == torch.device("npu", 1) and compat.current_device() == 1
        assert torch.zeros(1, device=torchport.device()).device == torch.device("npu", 1)
    assert torchport.device() == torch.device("npu", 0)
    compat.set_device(torch.device("cuda:1"))   # a CUDA device object, as run maps it
    assert torchport.device() == torch.device("npu", 1)
    compat.set_device(0)
    model = compat.DataParallel(torch.nn.Linear(2, 2).to(torchport.device()))
    assert list(model.state_dict()) == ["module.weight", "module.bias"] and model.device_ids == []
