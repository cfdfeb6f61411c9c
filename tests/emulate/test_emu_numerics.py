"""The cards' default float32 numerics, emulated: HF32 (Ascend conv/matmul) and TF32 (NVIDIA), issue 34.

Roundings are checked against values worked out by hand (bit patterns in the comments) and against an
independent float64 reference; the device paths against the CPU computing on the rounded operands.
"""

from __future__ import annotations

import math
import struct

import pytest
import torch
import torch.nn.functional as F

import torchport.emulate as emulate
from torchport.emulate import _numerics as N


def _f(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# (input, mantissa bits, rounding, expected) -- worked out by hand
HAND = [
    # TF32 keeps 10 bits: ulp(1) = 2**-10, half an ulp = 2**-11
    (1 + 2**-11, 10, "rne", 1.0),                  # a tie, kept lsb 0: stays (even)
    (1 + 2**-11, 10, "rna", 1 + 2**-10),           # a tie away from zero
    (1 + 2**-11, 10, "rz", 1.0),
    (1 + 3 * 2**-11, 10, "rne", 1 + 2**-9),        # a tie between 1+2**-10 (odd) and 1+2**-9 (even)
    (1 + 3 * 2**-11, 10, "rz", 1 + 2**-10),
    (1 + 2**-11 + 2**-20, 10, "rne", 1 + 2**-10),  # above half: up
    (1 + 2**-11 - 2**-20, 10, "rne", 1.0),         # below half: down
    (-(1 + 3 * 2**-11), 10, "rne", -(1 + 2**-9)),  # sign-magnitude: the same on the negative side
    (-(1 + 3 * 2**-11), 10, "rz", -(1 + 2**-10)),
    (2 - 2**-23, 10, "rne", 2.0),                  # carries into the exponent
    (_f(0x7F7FFFFF), 10, "rne", math.inf),         # the largest float32 rounds past TF32's largest: inf
    (_f(0x7F7FFFFF), 10, "rz", _f(0x7F7FE000)),
    (_f(0x00001000), 10, "rne", 0.0),              # subnormal tie, lsb 0: down to 0
    (_f(0x00003000), 10, "rne", _f(0x00004000)),   # subnormal tie, lsb 1: up
    (math.inf, 10, "rne", math.inf),
    (-math.inf, 10, "rna", -math.inf),
    (0.0, 10, "rne", 0.0),
    # HF32 keeps 11 bits: half an ulp of 1 = 2**-12
    (1 + 2**-12, 11, "rne", 1.0),
    (1 + 2**-12, 11, "rna", 1 + 2**-11),
    (1 + 3 * 2**-12, 11, "rne", 1 + 2**-10),
    (1 + 2**-11, 11, "rne", 1 + 2**-11),           # representable in HF32 (not in TF32): unchanged
]


@pytest.mark.parametrize("value,bits,rounding,expected", HAND)
def test_round_mantissa_hand_computed(value, bits, rounding, expected):
    out = N.round_mantissa(torch.tensor([value], dtype=torch.float32), bits, rounding)
    assert out.dtype == torch.float32
    assert _bits(out.item()) == _bits(expected), (hex(_bits(out.item())), hex(_bits(expected)))


def test_round_mantissa_matches_a_float64_reference_and_keeps_nan():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20000, generator=g) * torch.exp2(torch.randint(-60, 60, (20000,), generator=g).float())
    for bits, fmt in ((10, "tf32"), (11, "hf32")):
        ulp = torch.exp2(torch.floor(torch.log2(x.double().abs())) - bits)
        ref = (torch.round(x.double() / ulp) * ulp).float()      # torch.round: half to even
        assert torch.equal(N.round_mantissa(x, bits, "rne"), ref), fmt
        ref_rz = (torch.trunc(x.double() / ulp) * ulp).float()
        assert torch.equal(N.round_mantissa(x, bits, "rz"), ref_rz), fmt
    nan = torch.tensor([float("nan"), _f(0x7F800001), -float("nan"), 1.0])
    out = N.round_mantissa(nan, 10)
    assert out[:3].isnan().all() and out[3].item() == 1.0
    half = torch.ones(2, dtype=torch.float16)
    assert N.round_mantissa(half, 10) is half                    # fp16/bf16 fit both formats


def test_round_mantissa_rejects_bad_arguments():
    with pytest.raises(ValueError, match="rounding='up'"):
        N.round_mantissa(torch.ones(1), 10, "up")
    with pytest.raises(ValueError, match="mantissa_bits=24"):
        N.round_mantissa(torch.ones(1), 24)


def test_ulp_distance():
    one = torch.tensor([1.0, 0.0, -1.0, 1.0])
    nxt = torch.tensor([_f(0x3F800001), -0.0, _f(0xBF800002), 1.0])
    assert N.ulp_distance(one, nxt).tolist() == [1, 0, 2, 0]
    assert N.ulp_distance(torch.tensor([-_f(1)]), torch.tensor([_f(1)])).item() == 2   # across zero


def test_formats_state_their_sources_and_assumptions():
    assert (N.TF32.mantissa_bits, N.HF32.mantissa_bits) == (10, 11)
    for fmt in N.FORMATS.values():
        assert fmt.rounding in N.ROUNDINGS and fmt.source and "not document" in fmt.assumption


def _operands():
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)


def _r(t, bits=11):
    return N.round_mantissa(t, bits)


def test_npu_numerics_conv_hf32_by_default_matmul_not(emulated_npu):
    x, w, b = _operands()
    a, m = torch.randn(5, 7), torch.randn(7, 3)
    emulate.set_numerics("npu")
    assert torch.npu.conv.allow_hf32 is True and torch.npu.matmul.allow_hf32 is False
    assert torch.npu.aclnn.allow_hf32 is True                   # torch_npu: the conv switch's alias
    got = F.conv2d(x.npu(), w.npu(), b.npu()).cpu()
    assert torch.equal(got, F.conv2d(_r(x), _r(w), b))          # operands rounded, bias added in fp32
    assert not torch.equal(got, F.conv2d(x, w, b))
    assert torch.equal((a.npu() @ m.npu()).cpu(), a @ m)       # matmul: float32 by default
    torch.npu.matmul.allow_hf32 = True
    assert torch.equal((a.npu() @ m.npu()).cpu(), _r(a) @ _r(m))
    bias = torch.full((3,), 1 + 2**-20)
    assert torch.equal(torch.addmm(bias.npu(), a.npu(), m.npu()).cpu(), torch.addmm(bias, _r(a), _r(m)))
    torch.npu.aclnn.allow_hf32 = False
    assert torch.npu.conv.allow_hf32 is False
    assert torch.equal(F.conv2d(x.npu(), w.npu()).cpu(), F.conv2d(x, w))
    with pytest.raises(TypeError, match="allow_hf32 must be a bool"):
        torch.npu.matmul.allow_hf32 = 1


def test_npu_numerics_exact_by_default_and_reset_by_uninstall(emulated_npu):
    x, w, _ = _operands()
    assert torch.equal(F.conv2d(x.npu(), w.npu()).cpu(), F.conv2d(x, w))   # exact: the CPU's bytes
    with emulate.numerics("npu", rounding="rz"):
        assert torch.equal(F.conv2d(x.npu(), w.npu()).cpu(), F.conv2d(N.round_mantissa(x, 11, "rz"),
                                                                      N.round_mantissa(w, 11, "rz")))
    assert N.NUMERICS.mode == "exact" and N.NUMERICS.rounding == "rne"
    with pytest.raises(ValueError, match="'card'"):
        emulate.set_numerics("card")


def test_npu_numerics_round_the_backward_convolutions_too(emulated_npu):
    x, w, _ = _operands()
    emulate.set_numerics("npu")
    xn, wn = x.npu().requires_grad_(), w.npu().requires_grad_()
    F.conv2d(xn, wn).square().sum().backward()
    xr, wr = _r(x).requires_grad_(), _r(w).requires_grad_()
    out = F.conv2d(xr, wr)
    grad_out = _r(2 * out.detach())                              # the backward's operands are rounded too
    gx, gw, _ = torch.ops.aten.convolution_backward(grad_out, _r(x), _r(w), None, (1, 1), (0, 0), (1, 1),
                                                    False, (0, 0), 1, (True, True, False))
    assert torch.equal(xn.grad.cpu(), gx) and torch.equal(wn.grad.cpu(), gw)
    assert N.NUMERICS.rounded["aten::convolution_backward"] >= 1


def test_npu_numerics_leave_fp16_autocast_alone(emulated_npu):
    x, w, _ = _operands()
    conv = torch.nn.Conv2d(3, 4, 3).npu()
    with torch.autocast("npu", dtype=torch.float16):
        plain = conv(x.npu()).cpu()
    emulate.set_numerics("npu")
    with torch.autocast("npu", dtype=torch.float16):
        assert torch.equal(conv(x.npu()).cpu(), plain)           # fp16 operands are HF32-exact


def test_cuda_numerics_on_the_host_follow_torchs_tf32_flags():
    x, w, b = _operands()
    a, m = torch.randn(5, 7), torch.randn(7, 3)
    counts: dict = {}
    plain_mm, plain_conv, tf32_conv = a @ m, F.conv2d(x, w), F.conv2d(_r(x, 10), _r(w, 10), b)
    assert torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32   # torch's defaults
    with emulate.cuda_numerics(counts=counts):
        assert torch.equal(F.conv2d(x, w, b), tf32_conv)
        assert torch.equal(a @ m, plain_mm)                      # matmul: float32 by default
        prev = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")               # read live, at every operator
        try:
            got = a @ m
        finally:
            torch.set_float32_matmul_precision(prev)
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            conv_off = F.conv2d(x, w)
    assert torch.equal(got, _r(a, 10) @ _r(m, 10)) and not torch.equal(got, plain_mm)
    assert torch.equal(conv_off, plain_conv)
    assert counts["aten::convolution"] == 1 and counts["aten::mm"] == 1
    assert torch.equal(F.conv2d(x, w, b), F.conv2d(x, w, b))     # outside the block: float32 again
    with pytest.raises(ValueError, match="rounding='half'"):
        with emulate.cuda_numerics("half"):
            pass


def test_torchport_run_numerics_option(tmp_path):
    from torchport.shim.runner import RunConfig, run

    script = tmp_path / "conv.py"
    out = tmp_path / "out.pt"
    script.write_text("import sys, torch\ng = torch.Generator().manual_seed(1)\n"
                      "x, w = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g)\n"
                      "torch.save(torch.nn.functional.conv2d(x, w), sys.argv[1])\n")
    x, w, _ = _operands()
    assert run(RunConfig(target=str(script), args=[str(out)], device="cpu", report="none", numerics="cuda")) == 0
    assert torch.equal(torch.load(out), F.conv2d(_r(x, 10), _r(w, 10)))
    assert run(RunConfig(target=str(script), args=[str(out)], device="cpu", report="none")) == 0
    assert torch.equal(torch.load(out), F.conv2d(x, w))
    assert run(RunConfig(target=str(script), device="cpu", report="none", numerics="tf32")) == 2
