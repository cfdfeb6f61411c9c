"""The accelerators' default float32 numerics, emulated on the host: HF32 (Ascend) and TF32 (NVIDIA).

On an Ascend card, float32 convolutions run in HF32 by default (``torch.npu.conv.allow_hf32``
is True; ``torch.npu.aclnn.allow_hf32`` is the same switch) and float32 matmuls do not
(``torch.npu.matmul.allow_hf32`` is False). On NVIDIA Ampere and later, cuDNN convolutions
run in TF32 by default (``torch.backends.cudnn.allow_tf32`` is True) and cuBLAS matmuls do not
(``torch.backends.cuda.matmul.allow_tf32`` is False, ``torch.get_float32_matmul_precision()``
is ``"highest"``). Both formats keep float32's 8-bit exponent and shorten the mantissa; the
products are accumulated in float32 (sources in docs/emulator.md, "Card numerics").

The emulation rounds the float32 *inputs* of the affected operators to the format's mantissa
and lets the host kernel multiply and accumulate in float32:

* emulated npu tensors (:func:`set_numerics` ``("npu")``): the C++ fallback asks :func:`classify`
  once per operator; the conv/matmul family, when its flag is on, gets the ``PRE`` bit and
  :func:`pre` rounds its operands before the CPU kernel runs (no cost for other operators);
* host tensors as a CUDA card would compute them (:func:`cuda_numerics`): a
  ``TorchDispatchMode`` reading torch's own TF32 flags at every operator (opt-in, no GPU needed).

Where the vendor does not document a detail the choice is an assumption, stated in
:data:`FORMATS` and docs/emulator.md, and switchable (``rounding="rne"|"rna"|"rz"``).
Nothing here imports torch at module import time except through the functions.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator

__all__ = ["VARIANTS", "variant", "Format", "FORMATS", "TF32", "HF32", "ROUNDINGS", "round_mantissa", "ulp_distance",
           "OPS", "set_numerics", "numerics", "cuda_numerics", "host_numerics", "CARDS", "card_numerics", "classify", "pre", "PRE",
           "ConvFlags", "MatmulFlags", "NUMERICS"]

#: the classify bit asking the C++ fallback to call :func:`pre` (``kPre`` in npu_native.cpp)
PRE = 16
#: rounding modes: round to nearest, ties to even / ties away from zero; toward zero (truncate)
ROUNDINGS = ("rne", "rna", "rz")


@dataclasses.dataclass(frozen=True)
class Format:
    """A float32-range format with a shorter mantissa, used inside an accelerator's matrix unit.

    Attributes:
        name: ``"tf32"`` / ``"hf32"``.
        mantissa_bits: explicit mantissa (fraction) bits kept (float32 has 23).
        rounding: the default float32 -> format rounding (one of :data:`ROUNDINGS`).
        source: where the format is described (docs/emulator.md has the full citations).
        assumption: what the vendor does not document and the emulation assumes.
    """

    name: str
    mantissa_bits: int
    rounding: str
    source: str
    assumption: str


TF32 = Format(
    "tf32", 10, "rne",
    "NVIDIA, 'TensorFloat-32 in the A100 GPU' (blogs.nvidia.com/blog/2020/05/14/tensorfloat-32-precision-format): "
    "8-bit exponent, 10-bit mantissa, FP32 accumulate; PTX ISA cvt.rna.tf32.f32 (sm_80) / cvt.rn.tf32.f32 (sm_90)",
    "cuBLAS/cuDNN do not document which conversion their TF32 kernels apply; round to nearest even "
    "(switchable: rna = PTX cvt.rna, rz = the low 13 bits ignored); benchmarks/gpu_suite.sh measures which matches",
)
HF32 = Format(
    "hf32", 11, "rne",
    "Ascend CANN docs (ATC --allow_hf32, env ENABLE_HF32_EXECUTION): HF32 has FP32's range and an 11-bit "
    "mantissa; Ascend C Matmul SetHF32(transMode): 0 = round to nearest even (default), 1 = ties away",
    "the rounding torch_npu's conv/matmul kernels use is not documented; round to nearest even (the "
    "Ascend C default transMode 0; switchable: rna, rz)",
)
FORMATS = {f.name: f for f in (TF32, HF32)}

#: operator -> (family, positions of the operands the matrix unit reads); the bias / the addend
#: ``self`` of addmm and baddbmm are added in float32 and stay unrounded. mv/addmv/dot are not
#: tensor-core/cube GEMMs and are left out.
OPS: dict[str, tuple[str, tuple[int, ...]]] = {
    "aten::mm": ("matmul", (0, 1)),
    "aten::bmm": ("matmul", (0, 1)),
    "aten::addmm": ("matmul", (1, 2)),
    "aten::baddbmm": ("matmul", (1, 2)),
    "aten::addbmm": ("matmul", (1, 2)),
    "aten::_addmm_activation": ("matmul", (1, 2)),
    "aten::convolution": ("conv", (0, 1)),
    "aten::_convolution": ("conv", (0, 1)),
    "aten::convolution_backward": ("conv", (0, 1, 2)),  # grad_output, input, weight
}


def round_mantissa(x: Any, mantissa_bits: int, rounding: str = "rne") -> Any:
    """``x`` (float32) rounded to ``mantissa_bits`` explicit mantissa bits, returned as float32.

    Args:
        x: a tensor; anything but float32 is returned unchanged (fp16/bf16 fit in both formats).
        mantissa_bits: bits of fraction to keep, 0..23 (TF32: 10, HF32: 11).
        rounding: ``"rne"`` (to nearest, ties to even), ``"rna"`` (ties away from zero) or
            ``"rz"`` (toward zero: the dropped bits are cut).

    Note:
        The exponent is float32's, so a value rounding past the largest finite number becomes
        inf (as the format would); inf stays inf, NaN stays NaN, subnormals round in place.

    Example::

        >>> round_mantissa(torch.tensor([1 + 2**-11]), 10).item()   # a tie: to even (1.0)
        1.0
    """
    import torch

    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        return x
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}: expected one of {', '.join(ROUNDINGS)}")
    drop = 23 - int(mantissa_bits)
    if not 0 <= drop <= 23:
        raise ValueError(f"mantissa_bits={mantissa_bits}: expected 0..23")
    if drop == 0:
        return x
    bits = x.view(torch.int32)
    mask = -(1 << drop)  # ...111000: clears the dropped bits
    if rounding == "rz":
        out = bits & mask
    elif rounding == "rna":
        out = (bits + (1 << (drop - 1))).bitwise_and_(mask)
    else:  # rne: add half an ulp minus one, plus the kept lsb (ties go to the even neighbour)
        out = (bits >> drop).bitwise_and_(1).add_(bits).add_((1 << (drop - 1)) - 1).bitwise_and_(mask)
    out = out.view(torch.float32)
    if bool(x.amax().isnan()) if x.numel() else False:  # one read pass: amax propagates NaN
        # a NaN's payload could carry into the sign bit: keep NaN as is
        out = torch.where(torch.isnan(x), x, out)
    return out


def ulp_distance(a: Any, b: Any) -> Any:
    """Elementwise distance in float32 units in the last place (int64 tensor; +0 and -0 are 0 apart)."""
    import torch

    def ordered(t: Any) -> Any:
        i = t.detach().to(torch.float32).contiguous().view(torch.int32).to(torch.int64)
        return torch.where(i < 0, -(i & 0x7FFFFFFF), i)

    return (ordered(a) - ordered(b)).abs()


# ----------------------------------------------------------------------------- the npu side
@dataclasses.dataclass
class _Numerics:
    """What the emulated npu computes in: ``mode`` "exact" (host float32) or "npu" (the card's)."""

    mode: str = "exact"
    conv_hf32: bool = True  # torch.npu.conv.allow_hf32 / torch.npu.aclnn.allow_hf32 (torch_npu default)
    matmul_hf32: bool = False  # torch.npu.matmul.allow_hf32 (torch_npu default)
    rounding: str = HF32.rounding
    rounded: dict = dataclasses.field(default_factory=dict)  # op name -> calls rounded (for reports)


NUMERICS = _Numerics()


def _changed() -> None:
    from torchport.emulate._tensor import reset_op_cache

    reset_op_cache()


def set_numerics(mode: str = "exact", *, rounding: str | None = None, conv_hf32: bool | None = None,
                 matmul_hf32: bool | None = None) -> None:
    """Choose what the emulated npu computes float32 convolutions and matmuls in.

    Args:
        mode: ``"exact"`` (host float32, the default: results equal the CPU's) or ``"npu"``
            (the card's numerics: HF32 where ``torch.npu.conv.allow_hf32`` /
            ``torch.npu.matmul.allow_hf32`` say so; their defaults are the card's, True / False).
        rounding: float32 -> HF32 rounding, ``"rne"`` (default), ``"rna"`` or ``"rz"``.
        conv_hf32, matmul_hf32: set the two flags too (the same as assigning
            ``torch.npu.conv.allow_hf32`` / ``torch.npu.matmul.allow_hf32``).

    Example::

        torchport.emulate.set_numerics("npu")          # conv in HF32, matmul in float32
        torch.npu.matmul.allow_hf32 = True             # ... and matmul too, as on the card
    """
    if mode not in ("exact", "npu"):
        raise ValueError(f"numerics mode {mode!r}: expected 'exact' or 'npu'")
    if rounding is not None and rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}: expected one of {', '.join(ROUNDINGS)}")
    NUMERICS.mode = mode
    if rounding is not None:
        NUMERICS.rounding = rounding
    if conv_hf32 is not None:
        NUMERICS.conv_hf32 = bool(conv_hf32)
    if matmul_hf32 is not None:
        NUMERICS.matmul_hf32 = bool(matmul_hf32)
    _changed()


@contextlib.contextmanager
def numerics(mode: str = "npu", **kwargs: Any) -> Iterator[None]:
    """:func:`set_numerics` inside the block, the previous settings after it."""
    saved = dataclasses.replace(NUMERICS, rounded=NUMERICS.rounded)
    set_numerics(mode, **kwargs)
    try:
        yield
    finally:
        set_numerics(saved.mode, rounding=saved.rounding, conv_hf32=saved.conv_hf32, matmul_hf32=saved.matmul_hf32)


def reset() -> None:
    """Back to the defaults (exact; the card's flag defaults); called by ``uninstall()``."""
    set_numerics("exact", rounding=HF32.rounding, conv_hf32=True, matmul_hf32=False)
    NUMERICS.rounded.clear()


def _family_on(family: str) -> bool:
    return NUMERICS.conv_hf32 if family == "conv" else NUMERICS.matmul_hf32


def classify(name: str) -> int:
    """:data:`PRE` for an operator whose operands the card rounds to HF32 under the current flags."""
    spec = OPS.get(name)
    if NUMERICS.mode != "npu" or spec is None or not _family_on(spec[0]):
        return 0
    return PRE


def pre(name: str, args: list) -> list:
    """The C++ fallback's pre-hook: ``[(position, rounded operand), ...]`` for the float32 operands."""
    spec = OPS.get(name)
    if spec is None:
        return []
    NUMERICS.rounded[name] = NUMERICS.rounded.get(name, 0) + 1
    out = []
    for i in spec[1]:
        t = args[i] if i < len(args) else None
        if t is not None and t.dtype.is_floating_point and t.dtype.itemsize == 4:
            out.append((i, round_mantissa(t, HF32.mantissa_bits, NUMERICS.rounding)))
    return out


class _Flags:
    """``torch.npu.conv`` / ``torch.npu.matmul`` (emulated): ``allow_hf32`` is the numerics switch;
    other attributes are kept, as torch_npu's option objects accept them."""

    _attr = ""

    def __getattr__(self, name: str) -> Any:
        if name == "allow_hf32":
            return getattr(NUMERICS, self._attr)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "allow_hf32":
            if not isinstance(value, bool):  # torch_npu's check (npu_config.py)
                raise TypeError(f"allow_hf32 must be a bool, but got {type(value).__name__}")
            setattr(NUMERICS, self._attr, value)
            _changed()
            return
        object.__setattr__(self, name, value)


class ConvFlags(_Flags):
    """``torch.npu.conv``: ``allow_hf32`` defaults to True (torch_npu's ALLOW_CONV_HF32)."""

    _attr = "conv_hf32"


class MatmulFlags(_Flags):
    """``torch.npu.matmul``: ``allow_hf32`` defaults to False (torch_npu's ALLOW_MATMUL_HF32)."""

    _attr = "matmul_hf32"


# ----------------------------------------------------------------------------- the cuda side
def _cuda_flags() -> dict[str, bool]:
    """torch's own TF32 switches, read live (``set_float32_matmul_precision("high")`` sets the matmul one)."""
    import torch

    return {"matmul": bool(torch._C._get_cublas_allow_tf32()), "conv": bool(torch._C._get_cudnn_allow_tf32())}


def _npu_flags() -> dict[str, bool]:
    """torch_npu's HF32 switches as the emulation holds them (``torch.npu.conv/matmul.allow_hf32``)."""
    return {"matmul": NUMERICS.matmul_hf32, "conv": NUMERICS.conv_hf32}


@contextlib.contextmanager
def host_numerics(card: str = "cuda", rounding: str | None = None, *, counts: dict | None = None) -> Iterator[None]:
    """Compute host float32 convolutions/matmuls in ``card``'s default numerics (no device needed).

    ``"cuda"``: TF32 where torch's own switches say so (``torch.backends.cudnn.allow_tf32``, default True;
    ``torch.backends.cuda.matmul.allow_tf32`` / ``set_float32_matmul_precision("high")``, default False).
    ``"npu"``: HF32 where the emulated ``torch.npu.conv/matmul.allow_hf32`` say so (default True / False),
    the same bits the emulated npu computes under ``set_numerics("npu")``. The switches are read at every
    operator. Only host (cpu) tensors are rounded; this is a ``TorchDispatchMode`` (every op passes
    through Python while it is on).

    Args:
        card: ``"cuda"`` or ``"npu"``.
        rounding: ``"rne"`` (default, see :data:`FORMATS`), ``"rna"`` or ``"rz"``.
        counts: a dict that gets op name -> calls rounded.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    fmt, flags = {"cuda": (TF32, _cuda_flags), "npu": (HF32, _npu_flags)}[card]
    rounding = rounding or fmt.rounding
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}: expected one of {', '.join(ROUNDINGS)}")
    specs: dict = {}
    bits = fmt.mantissa_bits

    class _Rounding(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            spec = specs.get(func, False)
            if spec is False:
                spec = specs[func] = OPS.get(func._schema.name)
            if spec is not None and flags()[spec[0]]:
                args = list(args)
                hit = False
                for i in spec[1]:
                    if i < len(args) and getattr(args[i], "dtype", None) is not None and args[i].device.type == "cpu":
                        rounded = round_mantissa(args[i], bits, rounding)
                        hit = hit or rounded is not args[i]
                        args[i] = rounded
                if hit and counts is not None:
                    counts[func._schema.name] = counts.get(func._schema.name, 0) + 1
            return func(*args, **kwargs)

    with _Rounding():
        yield


def cuda_numerics(rounding: str = TF32.rounding, *, counts: dict | None = None) -> Any:
    """Compute host float32 convolutions/matmuls as an NVIDIA card (Ampere+) would, no GPU needed.

    Inside the block, the float32 operands of the conv family are rounded to TF32 while
    ``torch.backends.cudnn.allow_tf32`` is True (torch's default), and of the matmul family
    while ``torch.backends.cuda.matmul.allow_tf32`` is True (``set_float32_matmul_precision``
    ``"high"``/``"medium"``; default False). The flags are read at every operator, so a script
    that sets them changes the emulation from then on. Other devices' tensors are left alone.

    Args:
        rounding: ``"rne"`` (default, see :data:`TF32`), ``"rna"`` or ``"rz"``.
        counts: a dict that gets op name -> calls rounded.

    Example::

        with torchport.emulate.cuda_numerics():
            loss = model(x).sum()      # convolutions in TF32, matmuls in float32
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}: expected one of {', '.join(ROUNDINGS)}")
    return host_numerics("cuda", rounding, counts=counts)


#: the names :func:`card_numerics` takes (``torchport run --numerics``, ``check parity --predict``)
CARDS = ("exact", "npu", "cuda")
#: ``torchport run --numerics`` / ``check --predict``: the choices and what each means
CLI_HELP = ("npu = HF32 convolutions on the emulated npu (torch.npu.conv/matmul.allow_hf32 decide), cuda = TF32 "
            "as cuDNN/cuBLAS would on host tensors (torch.backends.cudnn/cuda.matmul.allow_tf32 decide)")


def card_numerics(card: str, rounding: str | None = None) -> Any:
    """A context manager computing in ``card``'s default float32 numerics: ``"exact"`` (host float32,
    nothing rounded), ``"npu"`` (emulated npu tensors, :func:`numerics`) or ``"cuda"`` (host tensors,
    :func:`cuda_numerics`).

    Raises:
        ValueError: an unknown card or rounding (the message lists the choices).
    """
    if card not in CARDS:
        raise ValueError(f"numerics {card!r}: expected one of {', '.join(CARDS)}")
    if card == "npu":
        return numerics("npu", rounding=rounding)
    if card == "cuda":
        return cuda_numerics(rounding or TF32.rounding)
    return contextlib.nullcontext()


# -- the drift table of ``torchport check --predict`` ----------------------------------------------------

def variant(card: str | None, rounding: str | None = None, **flags: bool) -> Any:
    """A context computing in ``card``'s numerics with the npu's HF32 flags set as given (None = fp32)."""
    if card is None:
        return contextlib.nullcontext()
    @contextlib.contextmanager
    def ctx() -> Any:
        saved = (NUMERICS.conv_hf32, NUMERICS.matmul_hf32)
        NUMERICS.conv_hf32 = flags.get("conv_hf32", saved[0] if card != "npu" else True)
        NUMERICS.matmul_hf32 = flags.get("matmul_hf32", saved[1] if card != "npu" else False)
        try:
            with host_numerics(card, rounding):
                yield
        finally:
            NUMERICS.conv_hf32, NUMERICS.matmul_hf32 = saved

    return ctx()


#: the drift table's columns (``torchport check --predict``, benchmarks/bench_numerics.py):
#: name -> (card, flags); the card's defaults unless stated
VARIANTS: dict[str, tuple[str | None, dict]] = {
    "fp32": (None, {}),
    "npu": ("npu", {}),                                  # HF32 convolutions (torch.npu.conv.allow_hf32=True)
    "npu-hf32-all": ("npu", {"matmul_hf32": True}),      # and matmuls (torch.npu.matmul.allow_hf32=True)
    "cuda": ("cuda", {}),                                # TF32 convolutions (cudnn.allow_tf32=True)
}
