"""TP301-TP303: distributed training tied to CUDA -- nccl, DDP device ids, DataParallel."""

from __future__ import annotations

import re

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.rules.base import (COMPAT_NOTE, DeviceString, Rule, Site, call_args_plain, compat_call,
                                          keyword, positional, with_args)

__all__ = ["NcclBackend", "DdpDeviceIds", "DataParallel"]


class NcclBackend(Rule):
    code = "TP301"
    name = "nccl-backend"
    severity = "error"
    fix = "safe"
    values = True
    names = ("torch.distributed.Backend.NCCL",)
    needles = ("nccl", "NCCL")
    summary = 'Finds the `"nccl"` backend: `init_process_group("nccl")`, `backend="nccl"`, `Backend.NCCL`.'
    why = ("NCCL exists only for NVIDIA GPUs: Ascend needs `hccl`, Intel `xccl`, CPU `gloo`. "
           "A hard-coded `nccl` fails at `init_process_group` on every other backend.")
    example = 'import torch.distributed as dist\n\ndist.init_process_group(backend="nccl")\n'
    use_instead = ("import torch.distributed as dist\nimport torchport\n\n"
                   "dist.init_process_group(backend=torchport.current().backend.dist_backend)\n")
    fix_notes = ('Safe: `"nccl"` becomes `torchport.current().backend.dist_backend` (nccl / hccl / xccl / gloo). '
                 "Also in comparisons (the same test on a CUDA machine). `torchport.init_distributed()` does the whole torchrun set-up "
                 "(device per LOCAL_RANK, backend, timeout) in one call.")
    after_fix = ("fixed (`get_backend() == Backend.NCCL` now compares with the selected backend's (True after fix, False under `run`: the fixed file is the faithful one))")

    def on_value(self, ctx, node, value: DeviceString, site: Site) -> None:
        if value.device_type != "nccl":
            return
        ctx.report(self, node, '"nccl" exists only for NVIDIA GPUs; use `torchport.current().backend.dist_backend`',
                   fix=lambda n: ctx.expr(f"{ctx.tp}.current().backend.dist_backend"),
                   safety="safe")

    def on_reference(self, ctx, node, qualname: str) -> None:
        ctx.report(self, node, "`Backend.NCCL` exists only for NVIDIA GPUs; use "
                               "`torchport.current().backend.dist_backend`",
                   fix=lambda n: ctx.expr(f"{ctx.tp}.current().backend.dist_backend"))


class DdpDeviceIds(Rule):
    code = "TP302"
    name = "ddp-device-ids"
    severity = "error"
    fix = "unsafe"
    names = ("torch.nn.parallel.DistributedDataParallel",)
    needles = ("device_ids", "output_device")
    summary = "Finds `DistributedDataParallel(model, device_ids=[...], output_device=...)`."
    why = ("`device_ids` must name accelerator indices and must be None for CPU modules, so a CUDA script's "
           "`device_ids=[local_rank]` raises on a CPU (gloo) run.")
    example = ("from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
               "model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n")
    use_instead = "import torchport\n\nmodel = torchport.wrap_ddp(model)\n"
    fix_notes = ("Becomes `torchport.wrap_ddp(model, **other_kwargs)`, which passes the selected "
                 "device's index (or None on CPU) and returns the model unwrapped when the process group is "
                 "not initialised (single-process runs). Safe when the ids are the local rank "
                 "(`device_ids=[local_rank]` with `local_rank` from `LOCAL_RANK`: the device torchport selects); "
                 "also safe when the file calls `torch.cuda.set_device(<the same index>)` (an `mp.spawn` worker: "
                 "TP112 turns it into `torchport.select_device(index=gpu)`, whose index `wrap_ddp` passes); "
                 "unsafe otherwise (a `rank` from `mp.spawn` is not known to torchport: set `LOCAL_RANK` or "
                 "call `torchport.select_device(index=rank)` first).")
    after_fix = ("fixed (unsafe where the ids are not the local rank or the selected device)")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        ids, out = _ids_out(node)
        if ids is None and out is None or all(_guarded(ctx, a.value) for a in (ids, out) if a is not None):
            return
        module = keyword(node, "module") or positional(node, 0)
        n_pos = sum(a.keyword is None for a in node.args)
        msg = "`device_ids` / `output_device` hard-code accelerator indices; use `torchport.wrap_ddp(model)`"
        if module is None or not call_args_plain(node) or n_pos > 3:
            ctx.report(self, node, msg)
            return

        def fix(n: cst.Call) -> cst.Call:
            mod = next(a for a in n.args if a.keyword is None or a.keyword.value == "module")
            rest = [a for a in n.args if a.keyword is not None
                    and a.keyword.value not in ("module", "device_ids", "output_device")]
            first = mod.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
            return with_args(n.with_changes(func=ctx.expr(f"{ctx.tp}.wrap_ddp")), [first, *rest])

        def guarded(n: cst.Call) -> cst.Call:
            """--emit torch: the same ids where an accelerator exists, None on the CPU."""
            n_ids, n_out = _ids_out(n)
            space = cst.SimpleWhitespace(" ")

            def only_with_accelerator(arg: cst.Arg) -> cst.Arg:
                return arg.with_changes(value=cst.IfExp(
                    test=ctx.expr(f"{ctx.torch}.accelerator.is_available()"), body=arg.value, orelse=cst.Name("None"),
                    whitespace_before_if=space, whitespace_after_if=space, whitespace_before_else=space,
                    whitespace_after_else=space))

            return n.with_changes(args=[only_with_accelerator(a) if a is n_ids or a is n_out else a for a in n.args])

        def later() -> None:
            if ctx.emit_torch:   # the call keeps its ids: safe on every device
                ctx.report(self, node, msg.replace("use `torchport.wrap_ddp(model)`",
                                                   "pass them only where an accelerator exists"), fix=guarded,
                           safety="safe")
                return
            safe = all(ctx.int_device(v) == "local" or _selected(ctx, v) for v in _id_values(ids, out))
            ctx.report(self, node, msg, fix=fix, safety="safe" if safe else "unsafe")

        ctx.defer(later)


def _guarded(ctx, value: cst.BaseExpression) -> bool:
    """True for ``ids if torch.accelerator.is_available() else None`` (what ``--emit torch`` writes)."""
    return (isinstance(value, cst.IfExp) and isinstance(value.orelse, cst.Name) and value.orelse.value == "None"
            and ctx.is_call_to(value.test, "torch.accelerator.is_available"))


def _ids_out(call: cst.Call) -> tuple[cst.Arg | None, cst.Arg | None]:
    """The ``device_ids`` and ``output_device`` arguments of a DDP call (keyword or positional)."""
    return keyword(call, "device_ids") or positional(call, 1), keyword(call, "output_device") or positional(call, 2)


def _selected(ctx, index: cst.BaseExpression) -> bool:
    """True when the file made ``index`` the current device (``torch.cuda.set_device(gpu)``, which the fix
    turns into ``torchport.select_device(index=gpu)``, the index ``wrap_ddp`` then passes)."""
    code = re.escape(ctx.module.code_for_node(index))
    return re.search(rf"\bset_device\(\s*{code}\s*\)|\bselect_device\(\s*index\s*=\s*{code}\s*\)",
                     ctx.module.code) is not None


def _id_values(ids: cst.Arg | None, out: cst.Arg | None) -> list[cst.BaseExpression]:
    """The index expressions of ``device_ids=[...]`` and ``output_device=...`` (a non-list poisons the check)."""
    values: list[cst.BaseExpression] = []
    if ids is not None:
        if isinstance(ids.value, (cst.List, cst.Tuple)) and ids.value.elements:
            values.extend(el.value for el in ids.value.elements)
        else:
            values.append(cst.Name("__unknown__"))
    if out is not None:
        values.append(out.value)
    return values


class DataParallel(Rule):
    code = "TP303"
    name = "data-parallel"
    fix = "safe"
    names = ("torch.nn.DataParallel", "torch.nn.parallel.data_parallel")
    needles = ("DataParallel", "data_parallel")
    summary = "Finds `torch.nn.DataParallel(...)` and `torch.nn.parallel.data_parallel(...)`."
    why = ("DataParallel is single-process multi-thread replication that torch itself discourages; it works "
           "only where the backend implements its scatter/gather (not on Ascend NPU, whose migration guide "
           "requires DDP) and is slower than DDP even on CUDA.")
    example = ("import torch\n\nmodel = torch.nn.DataParallel(model)\n"
               "torch.save(model.module.state_dict(), \"model.pt\")\n")
    use_instead = ("import torch\nimport torchport\n\nmodel = torchport.compat.DataParallel(model)\n"
                   "torch.save(model.module.state_dict(), \"model.pt\")\n")
    fix_notes = ("Safe: `nn.DataParallel(model, ...)` becomes `torchport.compat.DataParallel(model, ...)`: "
                 "`torch.nn.DataParallel` itself where the backend runs it (CUDA: the same replication over the "
                 "same GPUs), elsewhere the one-device DataParallel `torchport run` builds -- the same type "
                 "(`isinstance(model, nn.DataParallel)` holds), `model.module`, and `state_dict` keys with "
                 "DataParallel's `module.` prefix, so checkpoints the original wrote load strictly into the fixed "
                 "script and the other way round, and `model.module` keeps working. (An earlier fix wrote "
                 "`torchport.wrap_ddp(model)`, which returns the bare model in one process: the keys lost their "
                 "prefix and `.module` its target.) To use several accelerators, launch with "
                 "`torchrun --nproc-per-node N` and wrap with `torchport.wrap_ddp(model)` after "
                 "`torchport.init_distributed()`. `--emit torch` keeps the runtime call here (torch has no "
                 "one-device DataParallel for backends without one). Not fixed (reported): the functional "
                 "`torch.nn.parallel.data_parallel(...)`.")
    after_fix = ("redirected to runtime: `nn.DataParallel(...)` (`torchport.compat.DataParallel`: DataParallel's "
                 "`state_dict` keys, `.module` and type); reported only -- harmless because `torchport run` leaves "
                 "it alike: the functional `torch.nn.parallel.data_parallel(...)` calls the module directly without "
                 "a GPU")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        msg = ("DataParallel is not supported on every backend; `torchport.compat.DataParallel(model)` is "
               "DataParallel where the backend runs it and one device elsewhere (for several devices: torchrun + "
               "`torchport.init_distributed()` + `torchport.wrap_ddp(model)`)")
        if qualname != "torch.nn.DataParallel" or not call_args_plain(node) or not node.args:
            ctx.report(self, node, msg)
            return
        note = COMPAT_NOTE if ctx.emit_torch else ""
        ctx.report(self, node, msg + note, fix=lambda n: compat_call(ctx, "DataParallel", n), safety="safe")

    def on_reference(self, ctx, node, qualname: str) -> None:
        """``isinstance(model, DataParallel)`` and similar are harmless: not reported."""
