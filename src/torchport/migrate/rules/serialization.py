"""TP501, TP502 and TP901: loading checkpoints onto CUDA, or from it."""

from __future__ import annotations

import re

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.rules.base import COMPAT_NOTE, DeviceString, Rule, call_args_plain, eq, keyword, positional, with_args
from torchport.migrate.rules.placement import is_cuda_device_expr

__all__ = ["LoadMapLocationCuda", "LoadCudaCheckpoint", "LoadWithoutMapLocation"]


_NOT = DeviceString(None, "")


def _map_location(node: cst.Call) -> cst.Arg | None:
    return keyword(node, "map_location") or positional(node, 1)


class LoadMapLocationCuda(Rule):
    code = "TP501"
    name = "load-map-location-cuda"
    severity = "error"
    fix = "safe"
    names = ("torch.load",)
    summary = 'Finds `torch.load(..., map_location="cuda:0")` (strings, `torch.device(...)`, dicts).'
    why = "The checkpoint is forced onto a CUDA device, so loading it raises anywhere else."
    example = 'import torch\n\nstate = torch.load("ckpt.pt", map_location="cuda:0")\n'
    use_instead = 'import torch\nimport torchport\n\nstate = torch.load("ckpt.pt", map_location=torchport.device())\n'
    fix_notes = ("Safe: the location becomes `torchport.device()`, also for `\"cuda:N\"` (the checkpoint lands on "
                 "the device this process trains on). Unsafe: a dict that maps CUDA devices to CUDA devices "
                 "(`{\"cuda:0\": f\"cuda:{rank}\"}`, the DDP-tutorial form) becomes `torchport.device()` -- storages "
                 "saved on the CPU then land on the device too; in a dict that also maps elsewhere, each CUDA value "
                 "becomes `str(torchport.device())` (unsafe: the index is dropped). Callables are reported only.")
    after_fix = ("fixed (a dict of CUDA devices: unsafe); reported only -- harmless because `torchport run` passes "
                 "a callable `map_location` through alike")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        arg = _map_location(node)
        if arg is None:
            return
        value = arg.value
        if is_cuda_device_expr(ctx, value) is not None:
            ctx.claim(value)
            ctx.report(self, value, "map_location puts the checkpoint on CUDA; use `torchport.device()`",
                       fix=lambda n: ctx.device_expr())
        elif isinstance(value, cst.Dict) and any(
            (ctx.device_string(el.value) or _NOT).device_type == "cuda"
            for el in value.elements if isinstance(el, cst.DictElement)
        ):
            elements = [el for el in value.elements if isinstance(el, cst.DictElement)]
            ctx.claim(value, *(el.value for el in elements), *(el.key for el in elements))
            targets = [ctx.device_string(el.value) for el in elements]
            if all(t is not None and t.device_type == "cuda" for t in targets) and len(elements) == len(value.elements):
                ctx.report(self, value, "map_location maps storages onto CUDA; use `map_location=torchport.device()`",
                           fix=lambda n: ctx.device_expr(), safety="unsafe")
            else:  # CUDA values beside others: each CUDA value becomes the selected device
                cuda_values = [el.value for el, t in zip(elements, targets) if t is not None and t.device_type == "cuda"]

                def fix(n: cst.Dict) -> cst.Dict:
                    values = {id(v) for v in cuda_values}
                    old = [el for el in value.elements]
                    return n.with_changes(elements=[
                        el.with_changes(value=cst.Call(func=cst.Name("str"), args=[cst.Arg(ctx.device_expr())]))
                        if isinstance(el, cst.DictElement) and id(o.value) in values else el
                        for el, o in zip(n.elements, old)])

                ctx.report(self, value, "map_location maps storages onto CUDA; map them to `str(torchport.device())`",
                           fix=fix, safety="unsafe")


def _restore_location(ctx) -> cst.BaseExpression:
    """``torchport.compat.restore_location``: CUDA-saved storages where ``torchport run`` puts them, the rest where
    torch does (under ``--emit torch`` too: torch's own ``map_location`` forms move every storage or none)."""
    return ctx.expr(f"{ctx.tp}.compat.restore_location")


def _load_fix(ctx):
    return lambda n: with_args(n, [*n.args, cst.Arg(_restore_location(ctx), keyword=cst.Name("map_location"),
                                                    equal=eq())])


_CUDA_CODE = re.compile(r"\bcuda\b")


def _plain_load(node: cst.Call) -> bool:
    return _map_location(node) is None and call_args_plain(node) and bool(node.args)


class LoadCudaCheckpoint(Rule):
    code = "TP502"
    name = "load-cuda-checkpoint"
    severity = "warning"
    fix = "safe"
    names = ("torch.load",)
    needles = ("cuda",)   # it reports only in a file that says `cuda` (_CUDA_CODE), whatever the load is named
    summary = ("Finds `torch.load(...)` without `map_location` in CUDA code (a file that uses `cuda`): its "
               "checkpoints were saved on a GPU.")
    why = ("Without `map_location` every tensor returns to the device it was saved from: a checkpoint written on a "
           "GPU fails to load on an NPU or CPU host (`Attempting to deserialize object on a CUDA device`), while "
           "`torchport run` loads it onto the selected device -- the fixed script would do worse than `run`.")
    example = 'import torch\n\n# trained on cuda\nstate = torch.load("ckpt.pt")\n'
    use_instead = ('import torch\nimport torchport\n\n# trained on cuda\n'
                   'state = torch.load("ckpt.pt", map_location=torchport.compat.restore_location)\n')
    fix_notes = ("Safe: adds `map_location=torchport.compat.restore_location`, which restores storages saved on "
                 "`cuda:N` where `torchport run` does (device N of the selected backend; the CPU on a CPU host) and "
                 "every other storage where torch would: on a CUDA machine exactly where the checkpoint was saved, "
                 "as without `map_location`; CPU-saved tensors stay on the CPU everywhere. `--emit torch` keeps this "
                 "runtime call (torch's own `map_location` forms move every storage, or none). Files that do not use "
                 "CUDA are left to TP901 (off by default).")
    after_fix = "redirected to runtime: `torch.load(f)` gets `map_location=torchport.compat.restore_location`"

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if not _plain_load(node) or _CUDA_CODE.search(ctx.module.code) is None:
            return
        note = COMPAT_NOTE if ctx.emit_torch else ""
        ctx.report(self, node, "torch.load without map_location restores GPU-saved tensors onto CUDA; pass "
                               f"`map_location=torchport.compat.restore_location` (what `torchport run` does){note}",
                   fix=_load_fix(ctx))


class LoadWithoutMapLocation(Rule):
    code = "TP901"
    name = "load-without-map-location"
    severity = "info"
    fix = "safe"
    default_enabled = False
    names = ("torch.load",)
    needles = ("load",)
    summary = ("Finds `torch.load(...)` without `map_location` in any file (off by default: most loads are fine; "
               "TP502 covers CUDA code).")
    why = ("Without `map_location` tensors return to the device they were saved from: a checkpoint written on a "
           "GPU fails to load on an NPU or CPU host.")
    example = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
    use_instead = ('import torch\nimport torchport\n\n'
                   'state = torch.load("ckpt.pt", map_location=torchport.compat.restore_location)\n')
    fix_notes = ("Safe: adds `map_location=torchport.compat.restore_location` (see TP502: GPU-saved storages land "
                 "where `torchport run` puts them, every other storage where torch would). Earlier versions added "
                 "`map_location=torchport.device()`, which also moved CPU-saved tensors onto the device (unsafe).")
    after_fix = "redirected to runtime: `torch.load(f)` gets `map_location=torchport.compat.restore_location`"

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if node in ctx.claimed or not _plain_load(node):
            return  # TP502 took it (CUDA code)
        ctx.report(self, node, "torch.load without map_location restores tensors onto the device they were saved "
                               "from; pass `map_location=torchport.compat.restore_location`", fix=_load_fix(ctx))
