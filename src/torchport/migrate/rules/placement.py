"""TP101-TP108: where tensors and modules go -- ``.cuda()``, ``"cuda"`` strings, device idioms.

The fixes target the torchport runtime: ``torchport.device()`` (a ``torch.device`` for
the selected backend) where a device object is expected, ``torchport.current().type``
(a ``str``) where the original was a string, so the rewritten value keeps its type.
"""

from __future__ import annotations

import ast
import re

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.ruleset import DEVICE_INDEX_LISTS, DEVICE_INDEX_NAMES
from torchport.migrate.rules.base import eq as _eq
from torchport.migrate.rules.base import calls_only
from torchport.migrate.rules.base import (
    COMPAT_NOTE,
    DeviceString,
    Rule,
    Site,
    call_args_plain,
    compat_call,
    compat_served,
    keyword,
    positional,
    with_args,
)

__all__ = ["IntDeviceIndex", "CudaMethod", "CudaDeviceConstructor", "CudaDeviceArgument", "CudaDeviceString", "IsCudaAttribute",
           "CudaTensorType", "CudaAvailabilityIdiom", "CudaFlag", "device_with_index", "is_cuda_device_expr"]

_INDEX_NOTE = "the explicit index is dropped: torchport picks the index from TORCHPORT_DEVICE or LOCAL_RANK"
#: what "safe" means for indices, shared by the rule pages
_LITERAL_NOTE = ('A literal index is kept: `"cuda:1"` becomes `torch.device(torchport.current().type, 1)` (on a CUDA '
                 'machine the same device; the index is ignored on CPU); `"cuda:0"` in a single-process script '
                 "(no `init_process_group` / `LOCAL_RANK` / DDP / spawn in the file) becomes `torchport.device()`, "
                 "which is `cuda:0` there too")


def device_with_index(ctx, index: cst.BaseExpression) -> cst.Call:
    """``torch.device(torchport.current().type, <index>)``."""
    return cst.Call(func=ctx.expr(f"{ctx.torch}.device"),
                    args=[cst.Arg(ctx.type_expr(), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                          cst.Arg(index)])


def _fstring_index(node: cst.CSTNode) -> cst.BaseExpression:
    """The index expression of ``f"cuda:{i}"``, ``"cuda:%d" % i`` or ``"cuda:{}".format(i)``."""
    if isinstance(node, cst.BinaryOperation):
        return node.right
    if isinstance(node, cst.Call):
        return node.args[0].value
    assert isinstance(node, cst.FormattedString)
    part = node.parts[1]
    assert isinstance(part, cst.FormattedStringExpression)
    return part.expression


def accelerator_type_expr(ctx, quote: str) -> cst.BaseExpression:
    """What ``"cuda"`` means in a comparison: the selected accelerator's type, never equal to a device type
    on a CPU-only run (``x.device.type == "cuda"`` guards accelerator-only work: pinning, syncing)."""
    tp = ctx.tp
    return ctx.expr(f"({tp}.current().type if {tp}.current().is_accelerator else {quote}no accelerator{quote})")


def literal_device(ctx, ds: DeviceString) -> cst.BaseExpression:
    """The device object for a literal ``"cuda:N"`` (see ``_LITERAL_NOTE``)."""
    return ctx.index_device_expr(cst.Integer(str(ds.index)), "literal")


def literal_device_str(ctx, ds: DeviceString, quote: str) -> cst.BaseExpression:
    """The string for a literal ``"cuda:N"``: ``str(torchport.device())`` or ``f"{torchport.current().type}:N"``.

    ``quote``: ``ctx.quote`` read during the walk (inside an f-string the other quote)."""
    if not (ds.index == 0 and not ctx.distributed):
        return cst.FormattedString(parts=[cst.FormattedStringExpression(ctx.type_expr()),
                                          cst.FormattedStringText(f":{ds.index}")], start=f"f{quote}",
                                   end=quote)
    return ctx.expr(f"str({ctx.tp}.device())")


def is_cuda_device_expr(ctx, expr: cst.BaseExpression) -> DeviceString | None:
    """A cuda device string, or ``torch.device(<cuda device string>)``."""
    ds = ctx.device_string(expr)
    if ds is not None:
        return ds if ds.device_type == "cuda" else None
    if ctx.is_call_to(expr, "torch.device") and len(expr.args) == 1:
        ds = ctx.device_string(expr.args[0].value)
        return ds if ds is not None and ds.device_type == "cuda" else None
    return None


def report_to_method(rule: Rule, ctx, node: cst.Call, msg: str, unknown_msg: str, index_msg: str) -> None:
    """Report a single-backend ``.cuda()``-style method call with a fix to ``.to(<device>, ...)``."""
    if not call_args_plain(node):
        ctx.report(rule, node, msg)
        return
    index = positional(node, 0) or keyword(node, "device")

    def fix(n: cst.Call, kind: str | None = None) -> cst.Call:
        kws = [a for a in n.args if a.keyword is not None and a.keyword.value != "device"]
        if kind is None:
            dev = ctx.device_expr()
        else:
            arg = positional(n, 0) or keyword(n, "device")
            dev = ctx.index_device_expr(arg.value, kind)
        return with_args(n.with_changes(func=n.func.with_changes(attr=cst.Name("to"))), [cst.Arg(dev), *kws])

    if index is None:
        ctx.report(rule, node, msg, fix=fix, safety="safe")
        return
    ctx.claim(index.value)

    def later() -> None:
        kind = ctx.int_device(index.value)
        if kind is None:
            ctx.report(rule, node, unknown_msg, fix=fix, safety="unsafe")
        else:
            ctx.report(rule, node, index_msg, fix=lambda n: fix(n, kind), safety="safe")

    ctx.defer(later)


class CudaMethod(Rule):
    code = "TP101"
    name = "cuda-method"
    severity = "error"
    fix = "safe"
    methods = ("cuda",)
    summary = "Finds `.cuda()` on tensors and modules."
    why = ("`.cuda()` can only move data to an NVIDIA (or ROCm) GPU. On an Ascend NPU, an Intel XPU, Apple MPS "
           "or a CPU-only host the same line raises, so the script needs a fork per device.")
    example = "model = model.cuda()\nx = x.cuda(non_blocking=True)\n"
    use_instead = ("import torchport\n\nmodel = model.to(torchport.device())\n"
                   "x = x.to(torchport.device(), non_blocking=True)\n")
    fix_notes = ("Safe: `.cuda()` and `.cuda(non_blocking=...)` become `.to(torchport.device(), ...)`; "
                 "`.cuda(i)` with an integer device index known from the file (a literal, `int(os.environ[\"LOCAL_RANK\"])`, "
                 "a `rank` / `local_rank` / `gpu` / `gpu_id` / `device_id` name or `self.` attribute bound to one, "
                 "`args.gpu`, a loop over `range(torch.cuda.device_count())`) becomes "
                 "`.to(torch.device(torchport.current().type, i))` -- or `.to(torchport.device())` when `i` is the "
                 "local rank or a literal 0 in a single-process script. Unsafe: `.cuda(x)` where `x` is not known "
                 "to be an integer -- " + _INDEX_NOTE + ".")
    after_fix = ("fixed (a call with `*args` / `**kwargs` is reported: its device is unknown -- rewrite it by hand)")

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        msg = "`.cuda()` only targets CUDA devices; use `.to(torchport.device())`"
        report_to_method(self, ctx, node, msg, f"{msg}; {_INDEX_NOTE}",
                         "`.cuda(i)` only targets CUDA devices; use `.to(torch.device(torchport.current().type, i))`")


class CudaDeviceConstructor(Rule):
    code = "TP102"
    name = "cuda-device-constructor"
    severity = "error"
    fix = "safe"
    names = ("torch.device",)
    fast_call_gate = staticmethod(calls_only)   # on_call only: a `torch.device` annotation marks nothing
    summary = 'Finds `torch.device("cuda")`, `torch.device("cuda:0")`, `torch.device(f"cuda:{i}")`, `torch.device("cuda", i)`.'
    why = ("A device object built from a CUDA string names the one backend the script was written on. "
           "Everything placed on it fails elsewhere.")
    example = 'import torch\n\ndevice = torch.device("cuda")\nrank_device = torch.device(f"cuda:{rank}")\n'
    use_instead = ("import torch\nimport torchport\n\ndevice = torchport.device()\n"
                   "rank_device = torch.device(torchport.current().type, rank)\n")
    fix_notes = ('Safe: `torch.device("cuda")` becomes `torchport.device()`; with an index expression '
                 "(`f\"cuda:{i}\"`, `\"cuda:%d\" % i`, `(\"cuda\", i)`) the index is kept: "
                 "`torch.device(torchport.current().type, i)`. " + _LITERAL_NOTE + ".")
    after_fix = ("fixed")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if not call_args_plain(node):
            return
        first = positional(node, 0) or keyword(node, "type")
        if first is None:
            return
        ds = ctx.device_string(first.value)
        if ds is None or ds.device_type != "cuda":
            return
        second = positional(node, 1) or keyword(node, "index")
        msg = "a CUDA-only device object"
        if second is not None:  # torch.device("cuda", i): keep the index, swap the type
            ctx.report(self, first.value, f"{msg}; use `torch.device(torchport.current().type, i)`",
                       fix=lambda n: ctx.type_expr())
            return
        ctx.claim(first.value)
        if ds.index_expr is not None:
            ctx.report(self, node, f"{msg}; use `torch.device(torchport.current().type, i)`",
                       fix=lambda n: device_with_index(ctx, _fstring_index(n.args[0].value)))
        elif ds.index is None:
            ctx.report(self, node, f"{msg}; use `torchport.device()`", fix=lambda n: ctx.device_expr())
        else:
            ctx.report(self, node, f"{msg}; use `torchport.device()` or `torch.device(torchport.current().type, i)`",
                       fix=lambda n: literal_device(ctx, ds))


class CudaDeviceArgument(Rule):
    code = "TP103"
    name = "cuda-device-argument"
    severity = "error"
    fix = "safe"
    values = True
    summary = 'Finds `device="cuda"` arguments (factories, modules, `.to(device=...)`) and `.to("cuda")`.'
    why = ('Tensors created with `device="cuda"` or moved with `.to("cuda")` exist only on NVIDIA GPUs; '
           "the call raises on any other backend.")
    example = 'x = torch.zeros(8, device="cuda")\ny = y.to("cuda:0")\n'
    use_instead = "import torchport\n\nx = torch.zeros(8, device=torchport.device())\ny = y.to(torchport.device())\n"
    fix_notes = ('Safe: `"cuda"` becomes `torchport.device()`; `f"cuda:{i}"` becomes '
                 "`torch.device(torchport.current().type, i)`. " + _LITERAL_NOTE + ".")
    after_fix = ("fixed")

    def on_value(self, ctx, node, value: DeviceString, site: Site) -> None:
        if value.device_type != "cuda" or site.role != "arg":
            return
        if not (site.keyword == "device" or (site.callee == ".to" and site.index == 0)):
            return
        if value.index_expr is not None:
            ctx.report(self, node, "a CUDA-only device argument; use `torch.device(torchport.current().type, i)`",
                       fix=lambda n: device_with_index(ctx, _fstring_index(n)))
            return
        if value.index is not None:
            ctx.report(self, node, "a CUDA-only device argument; use `torchport.device()` or "
                                   "`torch.device(torchport.current().type, i)`", fix=lambda n: literal_device(ctx, value))
            return
        ctx.report(self, node, "a CUDA-only device argument; use `torchport.device()`", fix=lambda n: ctx.device_expr())


class CudaDeviceString(Rule):
    code = "TP104"
    name = "cuda-device-string"
    severity = "warning"
    fix = "safe"
    values = True
    summary = ('Finds `"cuda"` / `"cuda:N"` / `f"cuda:{i}"` strings in other value positions: assignments, '
               "defaults, arguments, comparisons, returns, conditionals, dict values.")
    why = ('A `device = "cuda"` variable or a `--device` default of `"cuda"` carries the CUDA assumption into '
           "every place that uses it. Strings in log messages, dict keys and lists of choices are not reported.")
    example = 'device = "cuda"\nif x.device.type == "cuda":\n    pass\n'
    use_instead = ("import torchport\n\ndevice = torchport.current().type\nif x.device.type == (torchport.current().type "
                   "if torchport.current().is_accelerator else \"no accelerator\"):\n    pass\n")
    fix_notes = ('Safe: `"cuda"` becomes `torchport.current().type` (still a `str`); `f"cuda:{i}"` becomes '
                 '`f"{torchport.current().type}:{i}"`; in comparisons (`==`, `!=`, `in`) `"cuda"` becomes '
                 '`(torchport.current().type if torchport.current().is_accelerator else "no accelerator")`: the '
                 "same test on a CUDA machine, the selected accelerator elsewhere, and -- as on a CPU-only CUDA "
                 "install -- false on a CPU run, so guards around pinning or synchronising stay closed. A "
                 'comparison is left alone when the same operand is also compared with another device type '
                 '(`if d.type == "cuda": ... elif d.type == "npu": ...` already branches per backend). '
                 "`d in [\"cuda\", \"xpu\"]` and `getattr(args, \"device\", \"cuda\")` are device names held as data and are "
                 "fixed alike; a list that names `\"npu\"`, a dict with an `npu` key and a cuda/npu chain already serve "
                 "the npu and are left alone, as are device names in files that import caffe2. "
                 "Unsafe: parameter defaults (evaluated once, when the function is defined, which selects the "
                 'device at import time, before the script can choose one). Literal indices: `"cuda:1"` becomes '
                 '`f"{torchport.current().type}:1"`, `"cuda:0"` in a single-process script `str(torchport.device())` '
                 "(both the same string on a CUDA machine).")
    after_fix = ("fixed (a comparison with `\"cuda\"` now compares with the selected type (`x.device.type == \"cuda\"` is True on the npu after fix, False under `run`, which keeps the literal: the fixed file is the faithful one, see docs/shim.md))")

    def on_value(self, ctx, node, value: DeviceString, site: Site) -> None:
        if value.device_type != "cuda" or (site.role == "compare" and site.subject in ctx.dispatch_subjects):
            return  # `if d.type == "cuda": ... elif d.type == "npu": ...` already branches per backend
        # comparisons change meaning on CPU-only hosts; defaults are evaluated once, at definition time
        unsafe = site.role == "default"
        if value.index_expr is not None:
            quote = ctx.quote

            def fix(n: cst.BaseExpression) -> cst.BaseExpression:
                if isinstance(n, cst.Call):  # "cuda:{}".format(i)
                    return cst.FormattedString(parts=[cst.FormattedStringExpression(ctx.type_expr()),
                                                      cst.FormattedStringText(":"),
                                                      cst.FormattedStringExpression(n.args[0].value)],
                                               start=f"f{quote}", end=quote)
                if isinstance(n, cst.BinaryOperation):  # "cuda:%d" % i
                    return n.with_changes(left=cst.BinaryOperation(
                        left=ctx.type_expr(), operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                                               whitespace_after=cst.SimpleWhitespace(" ")),
                        right=cst.SimpleString(f"{quote}:%d{quote}"), lpar=[cst.LeftParen()],
                        rpar=[cst.RightParen()]))
                return n.with_changes(parts=[cst.FormattedStringExpression(ctx.type_expr()),
                                             cst.FormattedStringText(":"), n.parts[1]])

            ctx.report(self, node, 'a CUDA device string; use `f"{torchport.current().type}:{i}"`', fix=fix,
                       safety="unsafe" if unsafe else "safe")
        elif value.index is None and site.role == "compare":
            q = ctx.quote
            ctx.report(self, node, "a CUDA device string; compare with the selected accelerator's type",
                       fix=lambda n: accelerator_type_expr(ctx, q))
        elif value.index is None:
            ctx.report(self, node, "a CUDA device string; use `torchport.current().type`",
                       fix=lambda n: ctx.type_expr(), safety="unsafe" if unsafe else "safe")
        else:
            ctx.report(self, node, 'a CUDA device string; use `str(torchport.device())` or '
                                   '`f"{torchport.current().type}:N"`',
                       fix=lambda n, q=ctx.quote: literal_device_str(ctx, value, q),
                       safety="unsafe" if unsafe else "safe")


class IsCudaAttribute(Rule):
    code = "TP105"
    name = "is-cuda-attribute"
    severity = "warning"
    fix = "safe"
    attributes = ("is_cuda",)
    needles = ("is_cuda",)
    summary = "Finds `tensor.is_cuda`."
    why = ("`is_cuda` is False for tensors on an NPU or XPU, so code that branches on it (to synchronize, to pin, "
           "to copy back) silently takes the CPU path on every other accelerator, and `assert x.is_cuda` after "
           "moving a batch fails there.")
    example = "if x.is_cuda:\n    x = x.cpu()\n"
    use_instead = "import torchport\n\nif (x.device.type == torchport.current().type):\n    x = x.cpu()\n"
    fix_notes = ("Safe: becomes `(x.device.type == torchport.current().type)` -- \"is the tensor on the selected "
                 "device\", the one meaning torchport gives `is_cuda` (`torchport run` answers the same for your "
                 "code, see docs/shim.md). On a CUDA machine that is exactly `is_cuda`; on the CPU fallback it is "
                 "True for CPU tensors, so `assert x.is_cuda` after a move still holds. Not rewritten (reported "
                 "without a fix): a test whose `if` leads to a compiled CUDA-only kernel (`if not x.is_cuda: "
                 "return portable(x)` then `_C.op(x)`), where the rewrite would send npu tensors into that kernel. "
                 "Not reported: tests inside a cuda/npu `if`/`elif` chain (see docs/scan_accuracy.md).")
    after_fix = ("fixed")

    def on_attribute(self, ctx, node: cst.Attribute) -> None:
        def fix(n: cst.Attribute) -> cst.Comparison:
            dev = cst.Attribute(value=cst.Attribute(value=n.value, attr=cst.Name("device")), attr=cst.Name("type"))
            return cst.Comparison(left=dev, comparisons=[cst.ComparisonTarget(
                operator=cst.Equal(), comparator=ctx.type_expr())], lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

        ctx.report(self, node, "`is_cuda` is false on every other accelerator; use "
                               "`x.device.type == torchport.current().type`", fix=fix)


_TENSOR_TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
                 "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16",
                 "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool"}


def _alias_statement(ctx, value: cst.CSTNode) -> str | None:
    """How ``value`` (a ``torch.cuda.XTensor`` reference) is used as a type alias: ``"branch"`` when it is the
    whole right side of ``X = torch.cuda.XTensor`` in the body of an ``if`` whose ``else`` assigns
    ``X = torch.XTensor`` (PyTorch-GAN's statement form of the alias), ``"alone"`` for any other
    ``X = torch.cuda.XTensor`` statement (clustergan's ``sample_z``), None when it is not an alias statement."""
    if not any(value is bound for values in ctx.bindings.values() for bound in values):
        return None
    found: list[str] = []

    def assigns(block: cst.BaseSuite) -> dict[str, cst.BaseExpression]:
        out = {}
        for stmt in getattr(block, "body", ()):
            for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
                if (isinstance(small, cst.Assign) and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    out[small.targets[0].target.value] = small.value
        return out

    class _Find(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            if not isinstance(node.orelse, cst.Else):
                return
            other = assigns(node.orelse.body)
            for name, bound in assigns(node.body).items():
                if bound is value and other.get(name) is not None:
                    if ctx.qualname(other[name]) == "torch." + ctx.qualname(value)[len("torch.cuda."):]:
                        found.append(name)

    ctx.module.visit(_Find())
    return "branch" if found else "alone"


class CudaTensorType(Rule):
    code = "TP106"
    name = "cuda-tensor-type"
    severity = "error"
    fix = "safe"
    names = tuple(f"torch.cuda.{t}" for t in _TENSOR_TYPES)
    methods = ("type",)
    strings = tuple(f"torch.cuda.{t}" for t in _TENSOR_TYPES)
    summary = ("Finds the legacy `torch.cuda.FloatTensor`-style types (constructors, `.type(...)`, `isinstance`, "
               "and type strings: `x.type() == \"torch.cuda.FloatTensor\"`).")
    why = ("The legacy typed constructors exist per device module and are deprecated; `torch.cuda.FloatTensor` "
           "cannot be created without CUDA.")
    example = "import torch\n\nx = x.type(torch.cuda.FloatTensor)\n"
    use_instead = "import torch\nimport torchport\n\nx = x.to(device=torchport.device(), dtype=torch.float32)\n"
    fix_notes = ("Safe: `x.type(torch.cuda.XTensor)` (or the string form) becomes "
                 "`x.to(device=torchport.device(), dtype=torch.<dtype>)`; the alias idiom "
                 "`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` (every script of some GAN "
                 "collections) becomes `Tensor = torchport.current().module.FloatTensor if cuda else "
                 "torch.FloatTensor`: the same class on a CUDA machine, `torch.npu.FloatTensor` on Ascend "
                 "(torch has no legacy types for XPU or MPS: there the line raises `AttributeError`). "
                 "The statement forms are fixed the same way: in `if cuda: Tensor = torch.cuda.FloatTensor` / "
                 "`else: Tensor = torch.FloatTensor` the CUDA branch becomes "
                 "`torchport.current().module.FloatTensor`; an unconditional `Tensor = torch.cuda.FloatTensor` "
                 "becomes `torchport.current().module.FloatTensor if torchport.current().is_accelerator else "
                 "torch.FloatTensor` (CPU tensors on the CPU fallback, as `torchport run` gives). "
                 "A constructor call (`torch.cuda.HalfTensor(2, 3)`, `torch.cuda.FloatTensor(ndarray)`) becomes "
                 "`torchport.compat.HalfTensor(2, 3)`: torch's own on CUDA, a tensor of that dtype on the selected "
                 "device elsewhere, as `torchport run` builds it. `isinstance` checks are reported without a fix "
                 "(compare `x.dtype` and `x.device.type`).")
    after_fix = ("fixed: `.type(...)` and the alias idiom; redirected to runtime: constructor calls "
                 "(`torchport.compat`); reported only -- harmless because `isinstance(x, torch.cuda.FloatTensor)` "
                 "answers False without a GPU, under `torchport run` alike")
    if_exps = True
    if_exp_names = names   # on_if_exp needs a `torch.cuda.XTensor` branch

    def on_if_exp(self, ctx, node: cst.IfExp) -> None:
        """``torch.cuda.XTensor if cond else torch.XTensor`` (either order): the CUDA half becomes the
        selected backend's own legacy type."""
        names = [ctx.qualname(b) if isinstance(b, (cst.Name, cst.Attribute)) else None
                 for b in (node.body, node.orelse)]
        for i, q in enumerate(names):
            other = names[1 - i]
            if (q is not None and q.startswith("torch.cuda.") and q[len("torch.cuda."):] in _TENSOR_TYPES
                    and other == "torch." + q[len("torch.cuda."):]):
                cuda_half = (node.body, node.orelse)[i]
                short = q[len("torch.cuda."):]
                ctx.claim(cuda_half)
                ctx.report(self, cuda_half, f"legacy CUDA tensor type `{q}`; use the selected backend's "
                                            f"`torchport.current().module.{short}`",
                           fix=lambda n, s=short: ctx.expr(f"{ctx.tp}.current().module.{s}"))
                return

    def on_call(self, ctx, node, qualname: str) -> None:
        short = qualname.rsplit(".", 1)[1]
        dtype = _TENSOR_TYPES[short]
        if call_args_plain(node) and compat_served(short):
            note = COMPAT_NOTE if ctx.emit_torch else ""
            ctx.report(self, node, f"legacy CUDA tensor constructor `{qualname}`; use `torchport.compat.{short}(...)` "
                                   f"(a {dtype} tensor on the selected device, as `torchport run` builds it){note}",
                       fix=lambda n: compat_call(ctx, short, n))
            return
        ctx.report(self, node, f"legacy CUDA tensor constructor `{qualname}`; use "
                               f"`torch.tensor(..., dtype=torch.{dtype}, device=torchport.device())`")

    def on_reference(self, ctx, node, qualname: str) -> None:
        short = qualname[len("torch.cuda."):]
        alias = _alias_statement(ctx, node)
        if alias is None:
            ctx.report(self, node, f"legacy CUDA tensor type `{qualname}`; compare `x.dtype` and `x.device.type` "
                                   "instead")
        elif alias == "branch":  # if cuda: Tensor = torch.cuda.T / else: Tensor = torch.T
            ctx.report(self, node, f"legacy CUDA tensor type `{qualname}`; use the selected backend's "
                                   f"`torchport.current().module.{short}`",
                       fix=lambda n: ctx.expr(f"{ctx.tp}.current().module.{short}"))
        else:  # Tensor = torch.cuda.T on its own
            ctx.report(self, node, f"legacy CUDA tensor type `{qualname}`; use `torchport.current().module.{short} "
                                   f"if torchport.current().is_accelerator else torch.{short}`",
                       fix=lambda n: ctx.expr(f"{ctx.tp}.current().module.{short} if "
                                              f"{ctx.tp}.current().is_accelerator else {ctx.torch}.{short}"))

    def on_string(self, ctx, node: cst.SimpleString, value: str) -> None:
        """``p.type() == "torch.cuda.FloatTensor"`` / ``p.type() in ["torch.cuda.HalfTensor", ...]``: the type
        string names the device module, so the test is false for npu tensors of the same dtype."""
        dtype = _TENSOR_TYPES[value[len("torch.cuda."):]]
        ctx.report(self, node, f"legacy CUDA type string `{value}`: `x.type()` names the device module, so this is "
                               f"false for a {dtype} tensor on any other device; compare `x.dtype == torch.{dtype}` "
                               "(and `x.device.type` where the device matters)")

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return
        arg = node.args[0].value
        q = ctx.qualname(arg) if isinstance(arg, (cst.Name, cst.Attribute)) else None
        if q is None and isinstance(arg, cst.SimpleString) and "torch.cuda." in arg.value:
            q = arg.evaluated_value if isinstance(arg.evaluated_value, str) else None
        if q is None or not q.startswith("torch.cuda.") or q[len("torch.cuda."):] not in _TENSOR_TYPES:
            return
        dtype = _TENSOR_TYPES[q[len("torch.cuda."):]]
        ctx.claim(arg)

        def fix(n: cst.Call) -> cst.Call:
            args = [cst.Arg(ctx.device_expr(), keyword=cst.Name("device"), equal=_eq(),
                            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(ctx.expr(f"{ctx.torch}.{dtype}"), keyword=cst.Name("dtype"), equal=_eq())]
            return n.with_changes(func=n.func.with_changes(attr=cst.Name("to")), args=args)

        ctx.report(self, node, f"`.type({q})` converts to a CUDA-only type; use "
                               f"`.to(device=torchport.device(), dtype=torch.{dtype})`", fix=fix)




class CudaAvailabilityIdiom(Rule):
    code = "TP107"
    name = "cuda-availability-idiom"
    severity = "warning"
    fix = "safe"
    names = ("torch.device",)
    fast_call_gate = staticmethod(calls_only)   # on_call only: a `torch.device` annotation marks nothing
    if_exps = True
    if_exp_names = ("torch.cuda.is_available",)   # _cuda_branch needs the test to call it
    summary = 'Finds `"cuda" if torch.cuda.is_available() else "cpu"` (and the `torch.device(...)` forms).'
    why = ("The idiom looks portable but only ever picks CUDA or CPU: on an Ascend or XPU machine it silently "
           "trains on the CPU, typically 10-50x slower.")
    example = ('import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
               'name = "cuda" if torch.cuda.is_available() else "cpu"\n')
    use_instead = "import torchport\n\ndevice = torchport.device()\nname = torchport.current().type\n"
    fix_notes = ('Safe: the device form becomes `torchport.device()`, the string form `torchport.current().type` '
                 "(auto-selects npu > cuda > xpu > mps > cpu; `TORCHPORT_DEVICE` overrides); also with `\"cuda:0\"` "
                 "in a single-process script. Unsafe: any other index in the CUDA branch (it is dropped).")
    after_fix = ("fixed")

    def _cuda_branch(self, ctx, node: cst.IfExp) -> cst.BaseExpression | None:
        test, negated = node.test, False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negated = test.expression, True
        if not ctx.is_call_to(test, "torch.cuda.is_available") or test.args:
            return None
        cuda_branch, cpu_branch = (node.orelse, node.body) if negated else (node.body, node.orelse)
        if not _is_cpu(ctx, cpu_branch) or is_cuda_device_expr(ctx, cuda_branch) is None:
            return None
        return cuda_branch

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if len(node.args) != 1 or node.args[0].keyword is not None or not isinstance(node.args[0].value, cst.IfExp):
            return
        branch = self._cuda_branch(ctx, node.args[0].value)
        if branch is None:
            return
        ctx.claim(node.args[0].value)
        ctx.report(self, node, "picks only CUDA or CPU; use `torchport.device()`", fix=lambda n: ctx.device_expr(),
                   safety=self._safety(ctx, is_cuda_device_expr(ctx, branch)))

    def on_if_exp(self, ctx, node: cst.IfExp) -> None:
        branch = self._cuda_branch(ctx, node)
        if branch is None:
            return
        ds = is_cuda_device_expr(ctx, branch)
        if isinstance(branch, cst.Call):
            ctx.report(self, node, "picks only CUDA or CPU; use `torchport.device()`", fix=lambda n: ctx.device_expr(),
                       safety=self._safety(ctx, ds))
        elif ds.plain:
            ctx.report(self, node, "picks only CUDA or CPU; use `torchport.current().type`",
                       fix=lambda n: ctx.type_expr())
        else:
            ctx.report(self, node, "picks only CUDA or CPU; use `str(torchport.device())`",
                       fix=lambda n: ctx.expr(f"str({ctx.tp}.device())"), safety=self._safety(ctx, ds))

    @staticmethod
    def _safety(ctx, ds: DeviceString) -> str:
        """`"cuda:0"` in a single-process script is what `torchport.device()` gives; other indices are dropped."""
        if ds.index is None or (ds.index == 0 and not ctx.distributed):
            return "safe" if ds.index_expr is None else "unsafe"
        return "unsafe"


def _is_cpu(ctx, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    if ctx.is_call_to(expr, "torch.device") and len(expr.args) == 1:
        return _is_cpu(ctx, expr.args[0].value)
    return False


def _int_shaped(expr: cst.BaseExpression) -> bool:
    """An integer literal, a name, an attribute, a call, an arithmetic or a subscript (what can hold an index)."""
    return isinstance(expr, (cst.Integer, cst.Name, cst.Attribute, cst.Call, cst.BinaryOperation, cst.Subscript))


_FACTORIES = tuple(f"torch.{n}" for n in (
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
    "linspace", "logspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "empty_strided"))


class IntDeviceIndex(Rule):
    code = "TP109"
    name = "int-device-index"
    severity = "error"
    fix = "safe"
    names = ("torch.device", *_FACTORIES)
    methods = ("to",)
    # what ctx.int_device needs to call an int a device index: an index name (rank, gpu, device_id, device_ids ...:
    # "rank" covers local_rank and get_rank), RANK / LOCAL_RANK, device_count, or an int literal as the device
    needles = ("cuda", "RANK", "rank", "gpu", "device_id", "device_index", "device_list", "device_count",
               "init_process_group")
    # (no leading \b: looser, and the regex engine then finds its literal start quickly)
    needle_patterns = (r"\.to\(\s*\d", r"device\s*\(\s*\d", r"device\s*=\s*\d")
    summary = ("Finds integer device indices used as devices: `.to(rank)`, `.to(device=local_rank)`, "
               "`torch.device(gpu_id)`, `torch.zeros(2, device=rank)`.")
    why = ("To PyTorch a bare integer device means CUDA device N, so `model.to(local_rank)` -- the usual DDP "
           "style -- fails with \"Found no NVIDIA driver\" on an NPU, XPU or CPU host. The rule follows the "
           "integer through the file: int literals, `int(os.environ[\"LOCAL_RANK\"])`, names such as `rank`, "
           "`local_rank`, `gpu`, `gpu_id`, `device_id` (parameters, or names and `self.` attributes bound to such "
           "values), `args.gpu`, and loop variables over `range(torch.cuda.device_count())`.")
    example = ('import os\nimport torch\n\nlocal_rank = int(os.environ["LOCAL_RANK"])\nmodel = model.to(local_rank)\n\n'
               "def train(rank, model, x):\n    return model(x.to(rank))\n")
    use_instead = ('import os\nimport torch\nimport torchport\n\nlocal_rank = int(os.environ["LOCAL_RANK"])\n'
                   "model = model.to(torchport.device())\n\n"
                   "def train(rank, model, x):\n    return model(x.to(torch.device(torchport.current().type, rank)))\n")
    fix_notes = ("Safe (same device on a CUDA machine): an index from `LOCAL_RANK` becomes `torchport.device()` "
                 "(torchport selects the device of the local rank); any other index `i` becomes "
                 "`torch.device(torchport.current().type, i)`; a literal 0 in a single-process script becomes "
                 "`torchport.device()`. Integers the file does not show to be device indices are left alone "
                 "(`.to(n)` where `n` comes from elsewhere).")
    after_fix = ("fixed")

    def _check(self, ctx, arg_value: cst.BaseExpression, report_node: cst.CSTNode, whole_call: bool) -> None:
        if not _int_shaped(arg_value):
            return
        if isinstance(arg_value, cst.Call) and not (isinstance(arg_value.func, cst.Name)
                                                    and arg_value.func.value == "int"):
            return

        def later() -> None:
            kind = ctx.int_device(arg_value)
            if kind is None:
                return
            msg = ("an integer device means CUDA device N; use "
                   + ("`torchport.device()`" if kind == "local" else "`torch.device(torchport.current().type, i)`"))
            if whole_call:
                ctx.report(self, report_node, msg, fix=lambda n: ctx.index_device_expr(n.args[0].value, kind))
            else:
                ctx.report(self, report_node, msg, fix=lambda n: ctx.index_device_expr(n, kind))

        ctx.defer(later)

    @staticmethod
    def fast_call_gate(call: ast.Call, qualname: str | None, bound) -> bool:
        """Whether :meth:`on_call` / :meth:`on_method` may act on this call: its device argument has a shape
        :meth:`_check` takes and that ``ctx.int_device`` can call an index (looser than both)."""
        device = [k.value for k in call.keywords if k.arg == "device"]   # (never **kwargs: keyword() skips them)
        if qualname is None:          # .to(...): device= or the first positional
            args = device + call.args[:1]
        elif qualname != "torch.device":   # a factory: its device= argument
            args = device
        else:
            args = call.args[:1] if len(call.args) + len(call.keywords) == 1 else []
        return any(_maybe_int_device(a, bound) for a in args)

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        arg = keyword(node, "device") or positional(node, 0)
        if arg is not None:
            self._check(ctx, arg.value, arg.value, False)

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if qualname != "torch.device":  # a factory: its device= argument
            arg = keyword(node, "device")
            if arg is not None:
                self._check(ctx, arg.value, arg.value, False)
            return
        if len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
            self._check(ctx, node.args[0].value, node, True)


def _maybe_int_device(expr: ast.AST, bound, seen: frozenset[str] = frozenset()) -> bool:
    """False when ``ctx.int_device`` can only answer None for this ``ast`` expression (``bound``: binding key ->
    the statements binding it, from the fast scan). Mirrors its cases, looser: an int literal, ``int(...)``,
    ``x % n``, ``device_ids[i]``, a name or ``a.b`` named as an index, or bound to something that may be one."""
    t = type(expr)
    if t is ast.Constant:
        return type(expr.value) is int
    if t is ast.Name:
        return expr.id in DEVICE_INDEX_NAMES or _bound_int(expr.id, expr.id, bound, seen)
    if t is ast.Attribute:
        if type(expr.value) is not ast.Name:
            return False
        key = f"{expr.value.id}.{expr.attr}"
        if key in bound:
            return _bound_int(key, expr.attr, bound, seen)
        return expr.value.id != "self" and expr.attr in DEVICE_INDEX_NAMES
    if t is ast.Subscript:
        return type(expr.value) is ast.Name and expr.value.id in DEVICE_INDEX_LISTS
    if t is ast.Call:      # int(...), or (any alias of) torch.distributed.get_rank / get_local_rank
        f = expr.func
        name = f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else ""
        return name in ("int", "get_rank", "get_local_rank")
    if t is ast.BinOp:
        return type(expr.op) is ast.Mod
    return t is ast.Starred     # *args: anything


def _bound_int(key: str, short: str, bound, seen: frozenset[str]) -> bool:
    """Whether a statement binding ``key`` may give it an integer device index (``ctx.int_device``'s walk)."""
    if key in seen:
        return False
    for stmt in bound.get(key, ()):
        if type(stmt) is ast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) in (ast.Name, ast.Attribute):
            value = stmt.value
        elif type(stmt) is ast.AnnAssign and stmt.value is not None and type(stmt.target) in (ast.Name, ast.Attribute):
            value = stmt.value
        else:
            return True          # a loop over the device count, a chained or unpacking assignment ...: maybe
        if type(value) is ast.Constant and type(value.value) is int:
            if short in DEVICE_INDEX_NAMES:
                return True
        elif _maybe_int_device(value, bound, seen | {key}):
            return True
    return False


def backend_flag_pattern(backends: str) -> "re.Pattern[str]":
    """``--x`` / ``--no-x`` / ``--use_x`` ... for the backend names in the regex alternation ``backends``."""
    return re.compile(rf"^--?(?:(?:no|use|disable|enable|with|without)[-_]?)?(?:{backends})$")


#: What a backend-flag rule suggests instead (TP108, TP609).
DEVICE_FLAG_INSTEAD = ('import torchport\n\nparser.add_argument("--device", default="auto", '
                       'help="auto, cpu, cuda[:N], npu[:N], xpu, mps")\n'
                       "args = parser.parse_args()\ndevice = torchport.select_device(args.device).device\n")


def report_backend_flags(rule: Rule, ctx, node: cst.Call, pattern: "re.Pattern[str]", backend: str) -> None:
    """Report each positional ``add_argument`` flag matching ``pattern`` as tying the script to ``backend``."""
    for arg in node.args:
        if arg.keyword is None and isinstance(arg.value, cst.SimpleString):
            flag = arg.value.evaluated_value
            if isinstance(flag, str) and pattern.match(flag):
                ctx.report(rule, arg.value, f"`{flag}` ties the script to {backend}; accept `--device` (default "
                                            "`auto`) and call `torchport.select_device(args.device)`")


_FLAG = backend_flag_pattern("cuda")


class CudaFlag(Rule):
    code = "TP108"
    name = "cuda-flag"
    severity = "warning"
    methods = ("add_argument",)
    summary = "Finds `--cuda` / `--no-cuda` / `--use-cuda` command-line flags."
    why = ("A boolean CUDA flag can only choose between CUDA and CPU, so the script has no way to run on an NPU "
           "or XPU, and the flag's name lies once it does.")
    example = 'parser.add_argument("--no-cuda", action="store_true")\n'
    use_instead = DEVICE_FLAG_INSTEAD
    fix_notes = "No fix: the flag is part of the script's interface; replace it by hand (see above)."
    after_fix = ("reported only -- harmless because a command-line flag does nothing itself: the device built from it is fixed by TP102-TP107 (under `run` alike)")

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        report_backend_flags(self, ctx, node, _FLAG, "CUDA")
