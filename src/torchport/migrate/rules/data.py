"""TP401 and TP902: data loading tied to CUDA -- hard-coded pinned memory."""

from __future__ import annotations

import libcst as cst

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

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        arg = keyword(node, "pin_memory")
        if arg is None or not is_true(arg.value):
            return
        ctx.report(self, arg.value, "`pin_memory=True` regardless of backend; use "
                                    "`torchport.current().backend.pin_memory`",
                   fix=lambda n: ctx.expr(f"{ctx.tp}.current().backend.pin_memory"))


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
    use_instead = ("import torchport\n\nif torchport.current().backend.pin_memory:\n    batch = batch.pin_memory()\n"
                   "batch = torchport.to_device(batch)  # non_blocking where pinned\n")
    fix_notes = "No fix: guard the call with the backend's policy as above."

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        if node.args:
            return
        ctx.report(self, node, "`.pin_memory()` regardless of backend; guard it with "
                               "`torchport.current().backend.pin_memory`")
