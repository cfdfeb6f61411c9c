"""Tensor behaviour catalogue: the same Python-level operation on a cpu tensor and an npu tensor
must give the same result (the device name aside). Differences that cannot be removed are
listed in docs/emulator.md ("Known differences")."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch


def _pair(data=(1.5, -2.25, 3.0)):
    cpu = torch.tensor(data)
    return cpu, cpu.to("npu")


@pytest.mark.parametrize("spec", ["", ".3f", "8.2f", "e", ".1%", "+.2g", ">10.4f"])
def test_format_0dim(emulated_npu, spec):
    cpu = torch.tensor(2.718281828)
    assert format(cpu.to("npu"), spec) == format(cpu, spec)
    loss = (cpu.to("npu") * 2).mean()
    assert f"{loss:{spec}}" == f"{(cpu * 2).mean():{spec}}"


def test_format_ndim_raises_like_cpu(emulated_npu):
    cpu, npu = _pair()
    with pytest.raises(TypeError) as c:
        format(cpu, ".3f")
    with pytest.raises(TypeError) as n:
        format(npu, ".3f")
    assert str(n.value) == str(c.value).replace("Tensor", type(npu).__name__) or "unsupported format" in str(n.value)
    assert format(npu) == str(npu)


def test_repr_and_str(emulated_npu):
    cpu, npu = _pair()
    assert repr(npu) == repr(cpu)[:-1] + ", device='npu:0')"
    assert str(npu) == repr(npu)
    g = npu.clone().requires_grad_()
    assert repr(g) == "tensor([ 1.5000, -2.2500,  3.0000], device='npu:0', requires_grad=True)"
    assert repr((g * 2)).endswith("device='npu:0', grad_fn=<MulBackward0>)")


def test_deepcopy_pickle_and_save(emulated_npu):
    cpu, npu = _pair()
    d = copy.deepcopy(npu)
    assert d.device == npu.device and torch.equal(d.cpu(), cpu) and d.data_ptr() != npu.data_ptr()
    assert torch.equal(pickle.loads(pickle.dumps(cpu)), cpu)
    # plain pickle of a tensor writes its storage in torch's legacy format (TypedStorage.__reduce__),
    # which the card refuses for npu storages: so does the emulator, with the card's words
    with pytest.raises(RuntimeError, match="The npu storage desc is unavailable"):
        pickle.dumps(npu)
    buf = io.BytesIO()
    torch.save({"t": npu, "c": cpu}, buf)
    buf.seek(0)
    back = torch.load(buf)
    assert back["t"].device == npu.device and torch.equal(back["t"].cpu(), back["c"])


def test_parameter_isinstance_is_tensor(emulated_npu):
    cpu, npu = _pair()
    p_cpu, p_npu = torch.nn.Parameter(cpu.clone()), torch.nn.Parameter(npu.clone())
    for a, b in ((cpu, npu), (p_cpu, p_npu)):
        assert isinstance(b, torch.Tensor) == isinstance(a, torch.Tensor)
        assert torch.is_tensor(b) == torch.is_tensor(a)
        assert isinstance(b, torch.nn.Parameter) == isinstance(a, torch.nn.Parameter)
    assert p_npu.requires_grad and p_npu.device.type == "npu"
    assert repr(p_npu).startswith("Parameter containing:\ntensor(") and "device='npu:0'" in repr(p_npu)
    assert copy.deepcopy(p_npu).requires_grad and isinstance(copy.deepcopy(p_npu), torch.nn.Parameter)


def test_tolist_item_bool_len_iter(emulated_npu):
    cpu, npu = _pair()
    assert npu.tolist() == cpu.tolist()
    assert npu[1].item() == cpu[1].item()
    assert float(npu[0]) == float(cpu[0]) and int(npu[2]) == int(cpu[2])
    assert bool(npu[0] > 0) == bool(cpu[0] > 0)
    assert len(npu) == len(cpu) and [x.item() for x in npu] == [x.item() for x in cpu]
    assert npu.shape == cpu.shape and npu.dtype == cpu.dtype and npu.numel() == cpu.numel()
    assert hash(npu) != hash(cpu) and npu is not cpu


def test_inplace_on_views(emulated_npu):
    cpu, npu = _pair((1.0, 2.0, 3.0, 4.0))
    for t in (cpu, npu):
        v = t.view(2, 2)
        v[0].mul_(10)
        t[3:].add_(1)
        v.t()[1].zero_()
    assert npu.tolist() == cpu.tolist() == [10.0, 0.0, 3.0, 0.0]
    assert npu.view(2, 2)._base is npu and npu.view(2, 2).is_contiguous()


def test_numpy_errors_like_a_device_tensor(emulated_npu):
    cpu, npu = _pair()
    assert cpu.numpy().tolist() == cpu.tolist()
    with pytest.raises(TypeError, match=r"can't convert npu:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"):
        npu.numpy()
    assert npu.numpy(force=True).tolist() == cpu.tolist()


def test_hooks(emulated_npu):
    seen = {}
    for name, dev in (("cpu", "cpu"), ("npu", "npu")):
        x = torch.tensor([1.0, 2.0], device=dev, requires_grad=True)
        x.register_hook(lambda g, n=name: seen.setdefault(n, g.cpu().tolist()) and None)
        m = torch.nn.Linear(2, 1).to(dev)
        torch.nn.init.ones_(m.weight)
        h = m.register_forward_hook(lambda mod, i, o, n=name: seen.setdefault(n + "_fwd", o.device.type) and None)
        m(x * 3).sum().backward()
        h.remove()
        seen[name + "_param_grad"] = m.weight.grad.cpu().tolist()
    assert seen["npu"] == seen["cpu"] == [3.0, 3.0]
    assert seen["npu_fwd"] == "npu" and seen["npu_param_grad"] == seen["cpu_param_grad"]


def test_type_identity_is_a_plain_tensor_as_documented(emulated_npu):
    """An npu tensor is a plain torch.Tensor (a PrivateUse1 TensorImpl), as on hardware; docs/emulator.md says so."""
    _, npu = _pair()
    assert type(npu) is torch.Tensor
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "emulator.md").read_text()
    assert "type(t) is torch.Tensor" in docs and "wrapper subclass" not in docs


def test_inference_mode_views_and_results(emulated_npu):
    """A view of a normal tensor taken inside inference_mode stays a normal tensor (torchvision's
    accuracy() does ``target[None]`` there); fresh results are inference tensors -- as on cpu."""
    cpu, npu = _pair()
    for t in (cpu, npu):
        with torch.inference_mode():
            view = t[None]
            fresh = t * 2
            eq = (fresh[None] / 2).eq(view)
        assert not view.is_inference() and fresh.is_inference() and eq.all()
