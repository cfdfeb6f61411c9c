"""TP401 and TP902: data loading tied to CUDA -- hard-coded pinned memory."""

from __future__ import annotations

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.rules.base import Rule, is_true, keyword

__all__ = ["PinMemoryHardcoded", "PinMemoryCall"]


class PinMemoryHardcoded(Rule):
    code = "TP401"
    name = "pin-memory-hardcoded"
    fix = "safe"
    names = ("torch.utils.data.DataLoader",)
    needles = ("pin_memory",)
    summary = "Finds `DataLoader(..., pin_memory=True)`."
    why = ("Pinned host memory only helps where the backend copies from it asynchronously; without an "
           "accelerator it warns and wastes page-locked memory, and its benefit differs per backend.")
    example = "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds, batch_size=32, pin_memory=True)\n"
    use_instead = ("from torch.utils.data import DataLoader\nimport torchport\n\n"
                   "loader = DataLoader(ds, batch_size=32, pin_memory=torchport.current().backend.pin_memory)\n")
    fix_notes = ("Safe: `True` becomes `torchport.current().backend.pin_memory` (the backend's policy). "
                 "`DataLoader(ds, batch_size=32, **torchport.loader_kwargs())` also sets workers and seeding.")
    after_fix = "fixed"

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        arg = keyword(node, "pin_memory")
        if arg is None or not is_true(arg.value):
            return
        ctx.report(self, arg.value, "`pin_memory=True` regardless of backend; use "
                                    "`torchport.current().backend.pin_memory`",
                   fix=lambda n: ctx.expr(f"{ctx.tp}.current().backend.pin_memory"))


def _guarded(ctx) -> set:
    """``x.pin_memory()`` calls that are the body of ``... if <pin policy> else ...`` (what the fix writes; with
    ``--emit torch`` the policy reads ``torch.accelerator.is_available()``), computed once per file."""
    hit = ctx.memo.get("TP902")
    if hit is None:
        hit = set()
        code = ctx.module.code_for_node

        class _Find(cst.CSTVisitor):
            def visit_IfExp(self, node: cst.IfExp) -> None:
                test = code(node.test)
                if test.endswith("current().backend.pin_memory") or test.endswith("accelerator.is_available()"):
                    hit.add(node.body)

        ctx.module.visit(_Find())
        ctx.memo["TP902"] = hit
    return hit


class PinMemoryCall(Rule):
    code = "TP902"
    name = "pin-memory-call"
    severity = "info"
    default_enabled = False
    methods = ("pin_memory",)
    needles = ("pin_memory",)
    summary = "Finds `tensor.pin_memory()` calls (off by default: most are already guarded by a policy)."
    why = "Pinning needs an accelerator runtime: on a CPU-only host it raises; where it helps differs per backend."
    example = "batch = batch.pin_memory()\n"
    use_instead = "import torchport\n\nbatch = (batch.pin_memory() if torchport.current().backend.pin_memory else batch)\n"
    fix = "safe"
    fix_notes = ("Safe: `x.pin_memory()` becomes `(x.pin_memory() if torchport.current().backend.pin_memory else x)` "
                 "(`x` is evaluated once either way): pinned where the backend pins -- on CUDA, as before -- and the "
                 "tensor itself elsewhere, as `torchport run` answers `pin_memory()`.")
    after_fix = "fixed"

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        if node.args or not isinstance(node.func, cst.Attribute) or node in _guarded(ctx):
            return
        space = cst.SimpleWhitespace(" ")

        def fix(n: cst.Call) -> cst.BaseExpression:
            return cst.IfExp(test=ctx.expr(f"{ctx.tp}.current().backend.pin_memory"), body=n, orelse=n.func.value,
                             whitespace_before_if=space, whitespace_after_if=space, whitespace_before_else=space,
                             whitespace_after_else=space, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

        ctx.report(self, node, "`.pin_memory()` regardless of backend; pin only where the backend pins: "
                               "`(x.pin_memory() if torchport.current().backend.pin_memory else x)`", fix=fix)
