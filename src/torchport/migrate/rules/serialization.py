"""TP501 and TP901: loading checkpoints onto CUDA."""

from __future__ import annotations

import libcst as cst

from torchport.migrate.rules.base import EQ, DeviceString, Rule, call_args_plain, keyword, positional, with_args
from torchport.migrate.rules.placement import is_cuda_device_expr

__all__ = ["LoadMapLocationCuda", "LoadWithoutMapLocation"]


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
                 "saved on the CPU then land on the device too. Callables are reported only.")

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
            else:
                ctx.report(self, value, "map_location maps storages onto CUDA; use `map_location=torchport.device()`")


class LoadWithoutMapLocation(Rule):
    code = "TP901"
    name = "load-without-map-location"
    severity = "info"
    fix = "unsafe"
    default_enabled = False
    names = ("torch.load",)
    needles = ("load",)
    summary = "Finds `torch.load(...)` without `map_location` (off by default: most loads are fine)."
    why = ("Without `map_location` tensors return to the device they were saved from: a checkpoint written on a "
           "GPU fails to load on an NPU or CPU host.")
    example = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
    use_instead = 'import torch\nimport torchport\n\nstate = torch.load("ckpt.pt", map_location=torchport.device())\n'
    fix_notes = "Unsafe: adds `map_location=torchport.device()` (tensors saved on the CPU then land on the device too)."

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if _map_location(node) is not None or not call_args_plain(node) or not node.args:
            return
        ctx.report(self, node, "torch.load without map_location restores tensors onto the device they were saved "
                               "from; pass `map_location=torchport.device()`",
                   fix=lambda n: with_args(n, [*n.args, cst.Arg(ctx.device_expr(), keyword=cst.Name("map_location"),
                                                                equal=EQ)]))
