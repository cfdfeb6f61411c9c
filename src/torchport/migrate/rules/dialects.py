"""TP601-TP609: code written for one non-CUDA backend (Ascend NPU, Intel XPU, Apple MPS) back to portable.

The reverse of the CUDA rules: ``model.npu()``, ``torch.npu.amp.autocast()``, ``"npu:0"``,
``"hccl"``, ``import torch_npu``, ``from torch_npu.contrib import transfer_to_npu``,
``torch_npu.npu.set_compile_mode(...)``, ``ASCEND_RT_VISIBLE_DEVICES``, ``--mps`` flags,
``torch.backends.mps.is_available()`` chains and ``torch.xpu.*`` all tie a script to one
backend. The fixes target the same torchport runtime the CUDA fixes use, so a script comes
back from any single-backend dialect to one portable form.

"Safe" here means: the same behaviour on the backend the code was written for (the NPU
for NPU code), as "safe" means the same behaviour on a CUDA machine for the CUDA rules.
"""

from __future__ import annotations

import re

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.rules.amp import report_autocast
from torchport.migrate.rules.base import comma as _comma
from torchport.migrate.rules.base import calls_only
from torchport.migrate.rules.base import (COMPAT_NOTE, DeviceString, Rule, Site, call_args_plain, compat_call,
                                          compat_served, keyword, positional,
                                          report_tune_assign, tune_statement, with_args)
from torchport.migrate.rules.placement import (DEVICE_FLAG_INSTEAD, accelerator_type_expr, backend_flag_pattern,
                                               device_with_index, literal_device, report_backend_flags,
                                               literal_device_str, report_to_method)

__all__ = ["BackendMethod", "BackendDeviceString", "HcclBackend", "TorchNpuImport", "BackendApi",
           "BackendTuningKnob", "BackendVisibleDevices", "MpsAvailability", "BackendFlag", "DIALECTS"]

#: device types of the single-backend dialects
DIALECTS = ("npu", "xpu", "mps")
_NPU_NEEDLES = (".npu", "npu:", '"npu', "'npu", "torch_npu")
_XPU_NEEDLES = (".xpu", "xpu:", '"xpu', "'xpu")
_MPS_NEEDLES = (".mps", "mps:", '"mps', "'mps", "_mps", "-mps")


class BackendMethod(Rule):
    code = "TP601"
    name = "backend-method"
    severity = "error"
    fix = "safe"
    methods = ("npu", "xpu")
    needles = (".npu(", ".xpu(")
    summary = "Finds `.npu()` / `.xpu()` on tensors and modules (also with a device index)."
    why = ("`.npu()` exists only where torch_npu is installed and moves data only to an Ascend NPU; on the GPU "
           "workstations the same line raises. `.xpu()` is the Intel twin.")
    example = "model = model.npu()\nx = x.npu(non_blocking=True)\n"
    use_instead = ("import torchport\n\nmodel = model.to(torchport.device())\n"
                   "x = x.to(torchport.device(), non_blocking=True)\n")
    fix_notes = ("Safe: becomes `.to(torchport.device(), ...)`; with an integer index known from the file "
                 "(see TP109) `.to(torch.device(torchport.current().type, i))`. Unsafe: an index that is not "
                 "known to be an integer (it is dropped).")
    after_fix = ("fixed (a call with `*args` is reported: rewrite it by hand)")

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        msg = f"`.{name}()` only targets one backend; use `.to(torchport.device())`"
        report_to_method(self, ctx, node, msg, msg + "; the index is dropped", msg)


class BackendDeviceString(Rule):
    code = "TP602"
    name = "backend-device-string"
    severity = "error"
    fix = "safe"
    values = True
    names = ("torch.device",)
    fast_call_gate = staticmethod(calls_only)   # on_call only: a `torch.device` annotation marks nothing
    needles = _NPU_NEEDLES + _XPU_NEEDLES + _MPS_NEEDLES
    summary = ('Finds `"npu"`, `"npu:0"`, `f"npu:{i}"` (and `xpu`, `mps`) device strings and '
               "`torch.device(...)` built from them.")
    why = ('A `device = "npu:0"` or `torch.device("mps")` names the one backend the script was written on; '
           "everything placed there fails elsewhere.")
    example = ('import torch\n\ndevice = torch.device("npu:0")\nx = torch.zeros(2, device="npu")\n'
               'name = "mps"\n')
    use_instead = ("import torch\nimport torchport\n\ndevice = torchport.device()\n"
                   "x = torch.zeros(2, device=torchport.device())\nname = torchport.current().type\n")
    fix_notes = ('Safe: device objects and `device=` arguments become `torchport.device()` (with an index '
                 'expression `torch.device(torchport.current().type, i)`; a literal index is kept as in TP102); '
                 'other strings become `torchport.current().type` (or `f"{torchport.current().type}:{i}"`); in '
                 "comparisons the selected accelerator's type (false on a CPU run, as TP104); `map_location` "
                 'of `torch.load` becomes `torchport.device()` (`"npu:0"` is not a location on a CPU host). '
                 "Comparisons are left alone where the code already branches per backend: in a file that "
                 "also uses CUDA (`d.type if d.type != \"mps\" else \"cpu\"` special-cases MPS), or when the "
                 "same operand is compared with two device types (`if` / `elif`). "
                 "Unsafe: parameter defaults (as TP104).")
    after_fix = ("fixed")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if not call_args_plain(node):
            return
        first = positional(node, 0) or keyword(node, "type")
        ds = ctx.device_string(first.value) if first is not None else None
        if ds is None or ds.device_type not in DIALECTS:
            return
        msg = f"a device object for {ds.device_type} only; use `torchport.device()`"
        if positional(node, 1) or keyword(node, "index"):
            ctx.report(self, first.value, msg, fix=lambda n: ctx.type_expr())
            return
        ctx.claim(first.value)
        if ds.index_expr is not None:
            ctx.report(self, node, msg, fix=lambda n: device_with_index(ctx, _index(n.args[0].value)))
        elif ds.index is None:
            ctx.report(self, node, msg, fix=lambda n: ctx.device_expr())
        else:
            ctx.report(self, node, msg, fix=lambda n: literal_device(ctx, ds))

    def on_value(self, ctx, node, value: DeviceString, site: Site) -> None:
        if value.device_type not in DIALECTS:
            return
        if site.role == "compare" and (ctx.cuda_written or site.subject in ctx.dispatch_subjects):
            return  # a CUDA script's `d.type != "mps"` special-cases MPS; rewriting it would flip the test on CUDA
        msg = f'a device string for {value.device_type} only; use `torchport.device()` / `torchport.current().type`'
        if site.role == "arg" and (site.keyword == "device" or (site.callee == ".to" and site.index == 0)
                                   or (site.callee == "torch.load" and (site.keyword == "map_location"
                                                                        or site.index == 1))):
            if site.callee == "torch.load":
                ctx.report(self, node, msg, fix=lambda n: ctx.device_expr())
                return
            if value.index_expr is not None:
                ctx.report(self, node, msg, fix=lambda n: device_with_index(ctx, _index(n)))
            elif value.index is None:
                ctx.report(self, node, msg, fix=lambda n: ctx.device_expr())
            else:
                ctx.report(self, node, msg, fix=lambda n: literal_device(ctx, value))
            return
        safety = "unsafe" if site.role == "default" else "safe"
        quote = ctx.quote
        if value.index_expr is not None:
            def fix(n: cst.BaseExpression) -> cst.BaseExpression:
                return cst.FormattedString(parts=[cst.FormattedStringExpression(ctx.type_expr()),
                                                  cst.FormattedStringText(":"),
                                                  cst.FormattedStringExpression(_index(n))],
                                           start=f"f{quote}", end=quote)

            ctx.report(self, node, msg, fix=fix, safety=safety)
        elif value.index is None and site.role == "compare":
            ctx.report(self, node, msg, fix=lambda n: accelerator_type_expr(ctx, quote))
        elif value.index is None:
            ctx.report(self, node, msg, fix=lambda n: ctx.type_expr(), safety=safety)
        else:
            ctx.report(self, node, msg, fix=lambda n: literal_device_str(ctx, value, quote), safety=safety)


def _index(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.BinaryOperation):
        return node.right
    if isinstance(node, cst.Call):
        return node.args[0].value
    part = node.parts[1]
    assert isinstance(part, cst.FormattedStringExpression)
    return part.expression


class HcclBackend(Rule):
    code = "TP603"
    name = "hccl-backend"
    severity = "error"
    fix = "safe"
    values = True
    needles = ("hccl", "xccl")
    summary = 'Finds the `"hccl"` (Ascend) and `"xccl"` (Intel) collective backends.'
    why = ("HCCL exists only on Ascend NPUs, XCCL only on Intel GPUs: `init_process_group(\"hccl\")` fails on the "
           "GPU workstations (nccl) and on CPU runs (gloo).")
    example = 'import torch.distributed as dist\n\ndist.init_process_group(backend="hccl")\n'
    use_instead = ("import torch.distributed as dist\nimport torchport\n\n"
                   "dist.init_process_group(backend=torchport.current().backend.dist_backend)\n")
    fix_notes = ("Safe: becomes `torchport.current().backend.dist_backend` (hccl / nccl / xccl / gloo), also in "
                 "comparisons. `torchport.init_distributed()` does the whole set-up in one call.")
    after_fix = ("fixed")

    def on_value(self, ctx, node, value: DeviceString, site: Site) -> None:
        if value.device_type not in ("hccl", "xccl"):
            return
        ctx.report(self, node, f'"{value.device_type}" exists on one backend only; use '
                               "`torchport.current().backend.dist_backend`",
                   fix=lambda n: ctx.expr(f"{ctx.tp}.current().backend.dist_backend"),
                   safety="safe")


def _uses(ctx, name: str) -> int:
    """How often the code uses ``name`` (import statements, strings and comments do not count)."""
    return ctx.alias_uses.get(name, 0)


_PLAIN_IMPORT_TORCH = re.compile(r"^import torch\s*(#.*)?$", re.MULTILINE)


class TorchNpuImport(Rule):
    code = "TP604"
    name = "torch-npu-import"
    severity = "warning"
    fix = "safe"
    imports = ("torch_npu", "torch")
    import_modules = ("torch_npu", "torch.npu")   # on_import returns at once for any other torch module
    needles = ("torch_npu", "torch.npu")
    summary = "Finds `import torch_npu`, `from torch_npu.contrib import transfer_to_npu` and `import torch.npu`."
    why = ("`import torch_npu` fails on every machine without the Ascend stack, so the script no longer runs on "
           "the GPU workstations. `transfer_to_npu` patches `torch.cuda` for everyone, breaks libraries that "
           "then take CUDA paths and cannot be undone. torchport's npu backend record imports torch_npu itself "
           "when an NPU is there.")
    example = "import torch\nimport torch_npu\nfrom torch_npu.contrib import transfer_to_npu\n"
    use_instead = "import torch\n"
    fix_notes = ("Safe: the import line is removed when nothing else in the file uses the name it binds (the "
                 "NPU-only calls that did are rewritten by the other TP6xx rules in the same pass; "
                 "`transfer_to_npu`'s redirection is what the CUDA rules' fixes -- or `torchport run` -- provide). "
                 "Imports whose names stay in use, or that import several names at once, are reported only.")
    after_fix = ("fixed; reported only -- harmless because the import stays only where the file still uses torch_npu (its kernels, a guarded `try: import torch_npu`), which needs it alike")

    def on_import(self, ctx, node, module: str | None) -> None:
        if module is not None and module.split(".", 1)[0] == "torch":
            if module != "torch.npu" and not module.startswith("torch.npu."):
                return
            # `import torch.npu` binds `torch`: removable when a plain `import torch` binds it too
            msg = "`import torch.npu` exists only with torch_npu; `import torch` is enough"
            plain = isinstance(node, cst.Import) and len(node.names) == 1 and node.names[0].asname is None
            if plain and _PLAIN_IMPORT_TORCH.search(ctx.module.code):
                ctx.report(self, node, msg, fix=lambda n: cst.RemovalSentinel.REMOVE)
            else:
                ctx.report(self, node, msg)
            return
        if isinstance(node, cst.Import):
            if len(node.names) != 1:
                ctx.report(self, node, "`import torch_npu` ties the script to Ascend; torchport imports it when "
                                       "an NPU is present")
                return
            alias = node.names[0]
            bound = (alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                     else (module or "torch_npu").split(".", 1)[0])
        else:
            if isinstance(node.names, cst.ImportStar) or len(node.names) != 1:
                ctx.report(self, node, f"`from {module} import ...` ties the script to Ascend")
                return
            alias = node.names[0]
            bound = (alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                     else getattr(alias.name, "value", ""))
        what = "transfer_to_npu" if bound == "transfer_to_npu" else f"`{module}`"
        msg = (f"{what} ties the script to Ascend (and patches torch.cuda for every library); remove it"
               if bound == "transfer_to_npu" else
               f"importing {what} ties the script to Ascend; torchport's npu backend imports torch_npu itself")

        def later() -> None:
            if _uses(ctx, bound) == 0:
                ctx.report(self, node, msg, fix=lambda n: cst.RemovalSentinel.REMOVE)
            else:
                ctx.report(self, node, msg + f" (first rewrite the remaining uses of `{bound}`)")

        ctx.defer(later)


#: short name (after ``torch.npu.`` / ``torch_npu.npu.`` / ``torch.xpu.`` / ``torch.mps.``) -> (template, safety)
_API = {
    "is_available": ("{tp}.current().is_accelerator", "safe"),
    "synchronize": ("{tp}.synchronize()", "safe"),
    "current_device": ("{tp}.current().index", "safe"),
    "device_count": ("{tp}.current().backend.device_count()", "safe"),
    "empty_cache": ("{tp}.empty_cache()", "safe"),
    "manual_seed": ("{torch}.manual_seed(", "unsafe"),
    "manual_seed_all": ("{torch}.manual_seed(", "unsafe"),
    "memory_allocated": ("({tp}.memory_stats()[{q}allocated_bytes{q}] or 0)", "safe"),
    "max_memory_allocated": ("({tp}.memory_stats()[{q}peak_bytes{q}] or 0)", "safe"),
    "memory_reserved": ("({tp}.memory_stats()[{q}reserved_bytes{q}] or 0)", "safe"),
    "reset_peak_memory_stats": ("{tp}.reset_peak_memory()", "safe"),
    "is_bf16_supported": ("{tp}.current().backend.bf16_supported()", "safe"),
    # Apple's names for the allocator counters (torch.mps): the same counters of the selected device
    "current_allocated_memory": ("({tp}.memory_stats()[{q}allocated_bytes{q}] or 0)", "unsafe"),
    "driver_allocated_memory": ("({tp}.memory_stats()[{q}reserved_bytes{q}] or 0)", "unsafe"),
    "recommended_max_memory": ("{tp}.compat.mem_get_info()[1]", "unsafe"),
}
#: everything else a ``torchport.compat`` name serves (streams, events, seeding, RNG state, set_device, the memory
#: summary ...) becomes ``torchport.compat.<name>(...)``: on the backend the code was written for that is its own
#: module's function (the shim calls the selected backend's ``torch.<backend>.<name>``)
_PREFIXES = ("torch.npu.", "torch_npu.npu.", "torch.xpu.", "torch.mps.")


def _short(qualname: str) -> tuple[str, str]:
    """(backend, rest) for ``torch.npu.amp.autocast`` -> (``npu``, ``amp.autocast``)."""
    for prefix in _PREFIXES:
        if qualname.startswith(prefix):
            return prefix.rstrip(".").rsplit(".", 1)[1], qualname[len(prefix):]
    return "npu", qualname  # torch_npu.<anything else>: reported only


class BackendApi(Rule):
    code = "TP605"
    name = "backend-api"
    severity = "error"
    fix = "safe"
    names = ("torch.npu", "torch_npu.npu", "torch.xpu", "torch.mps")
    name_prefixes = (*_PREFIXES, "torch_npu.")
    needles = ("npu.", "xpu.", "mps.")
    summary = ("Finds the single-backend device API: `torch.npu.*` / `torch_npu.npu.*` (synchronize, set_device, "
               "amp.autocast, GradScaler, memory, seeding ...), `torch.xpu.*`, `torch.mps.*`.")
    why = ("`torch.npu` exists only with torch_npu installed, `torch.xpu` / `torch.mps` only do anything on their "
           "hardware: the script cannot run on the team's other machines.")
    example = ("import torch\n\ntorch.npu.set_device(0)\nwith torch.npu.amp.autocast():\n    loss = model(x)\n"
               "torch.npu.synchronize()\n")
    use_instead = ("import torchport\n\ntorchport.compat.set_device(0)\n"
                   "with torchport.autocast():\n    loss = model(x)\n"
                   "torchport.synchronize()\n")
    fix_notes = ("Safe: `synchronize`, `current_device`, `device_count`, `is_available`, "
                 "`empty_cache`, the memory counters, `is_bf16_supported`, `amp.autocast` and (XPU, MPS) "
                 "`amp.GradScaler` map to the torchport / torch.amp forms (same behaviour on the backend the code was "
                 "written for). Unsafe: `torch.npu.amp.GradScaler()` becomes `torch.amp.GradScaler(torchport."
                 "current().type)` -- the same scaling, but torch_npu's scaler keeps a `dynamic` flag in its "
                 "`state_dict` and requires it on load, so a checkpoint of the fixed script's scaler does not load "
                 "into the original's (`torchport.Amp` and torchport's checkpoints normalise the key). "
                 "Every other name `torchport.compat` serves -- `set_device`, seeding and RNG state, streams and "
                 "events, `memory_summary`, `mem_get_info` ... -- becomes `torchport.compat.<name>(...)`: on the "
                 "backend the code was written for, that backend's own function; elsewhere what `torchport run` "
                 "does for the CUDA name. Unsafe: Apple's `current_allocated_memory`, `driver_allocated_memory` "
                 "(the selected device's allocated / reserved counters, which on MPS torch reports through "
                 "`torch.accelerator`) and `recommended_max_memory` (the device's total memory). With "
                 "`--emit torch`, `manual_seed(_all)` becomes `torch.manual_seed` (unsafe: it also seeds the CPU). "
                 "Everything else (`torch.mps.compile_shader`, `torch.mps.profiler`, `torch_npu.npu_*` kernels ...) "
                 "is reported with `torchport.current().module` as the portable route.")
    after_fix = ("fixed: the names with a torchport / torch.amp form; redirected to runtime: the names "
                 "`torchport.compat` serves; reported only -- harmless because nothing but the backend's own hardware "
                 "runs them: Metal shaders, the MPS / NPU profilers and `torch_npu` kernels have no portable form "
                 "(`torchport run` does not redirect single-backend dialects, and the original fails alike elsewhere)")

    def on_reference(self, ctx, node, qualname: str) -> None:
        backend, rest = _short(qualname)
        ctx.report(self, node, f"`{qualname}` exists on {backend} only; use the selected backend's module "
                               "`torchport.current().module`")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        backend, rest = _short(qualname)
        if rest == "amp.autocast":
            return self._autocast(ctx, node, qualname)
        if rest == "amp.GradScaler":
            # torch_npu's scaler keeps a `dynamic` flag in its state_dict and requires it on load: a checkpoint of
            # torch.amp's scaler lacks it, so the saved state changes on the npu (unsafe)
            ctx.report(self, node, f"`{qualname}` is {backend}-only; use "
                                   "`torch.amp.GradScaler(torchport.current().type)`",
                       fix=lambda n: with_args(n.with_changes(func=ctx.expr(f"{ctx.torch}.amp.GradScaler")),
                                               [cst.Arg(ctx.type_expr(), comma=_comma()), *n.args]),
                       safety="unsafe" if backend == "npu" else "safe")
            return
        rep = _API.get(rest)
        plain = call_args_plain(node)
        drops = rep is not None and not rep[0].endswith("(") and bool(node.args)
        if plain and compat_served(rest) and (rep is None or drops or (rep[1] == "unsafe" and not ctx.emit_torch)):
            note = COMPAT_NOTE if ctx.emit_torch else ""
            ctx.report(self, node, f"`{qualname}` is {backend}-only; use `torchport.compat.{rest}(...)` (on {backend} "
                                   f"its own {backend} call){note}", fix=lambda n: compat_call(ctx, rest, n),
                       safety="safe")
            return
        if rep is None or not plain:
            return self.on_reference(ctx, node, qualname)
        template, safety = rep
        quote = ctx.quote
        keeps_args = template.endswith("(")

        def fix(n: cst.Call) -> cst.BaseExpression:
            names = {"q": quote}
            if "{tp}" in template:
                names["tp"] = ctx.tp
            if "{torch}" in template:
                names["torch"] = ctx.torch
            code = template.format(**names)
            return n.with_changes(func=ctx.expr(code[:-1])) if keeps_args else ctx.expr(code)

        if not keeps_args and node.args:
            safety = "unsafe"
        shown = template.format(tp="torchport", torch="torch", q='"') + ("...)" if keeps_args else "")
        ctx.report(self, node, f"`{qualname}` is {backend}-only; use `{shown}`", fix=fix, safety=safety)

    def _autocast(self, ctx, node: cst.Call, qualname: str) -> None:
        msg = f"`{qualname}` is single-backend autocast; use `torchport.autocast()`"
        report_autocast(self, ctx, node, msg)


#: knob qualified names -> the torchport.tune() keyword
_KNOB_CALLS = {"torch.npu.set_compile_mode": "jit_compile", "torch_npu.npu.set_compile_mode": "jit_compile"}
_KNOB_ASSIGNS = {
    **{f"{m}.config.allow_internal_format": "allow_internal_format" for m in ("torch.npu", "torch_npu.npu")},
    **{f"{m}.matmul.allow_hf32": "matmul_allow_hf32" for m in ("torch.npu", "torch_npu.npu")},
    **{f"{m}.conv.allow_hf32": "conv_allow_hf32" for m in ("torch.npu", "torch_npu.npu")},
}


class BackendTuningKnob(Rule):
    code = "TP606"
    name = "backend-tuning-knob"
    severity = "warning"
    fix = "safe"
    names = tuple(_KNOB_CALLS) + tuple(_KNOB_ASSIGNS)
    assignments = tuple(_KNOB_ASSIGNS)
    needles = ("set_compile_mode", "allow_internal_format", "allow_hf32")
    summary = ("Finds Ascend tuning knobs: `torch_npu.npu.set_compile_mode(jit_compile=...)`, "
               "`torch.npu.config.allow_internal_format = ...`, `torch.npu.matmul.allow_hf32 = ...`.")
    why = ("The knobs exist only with torch_npu, so the line fails everywhere else; and backend tuning scattered "
           "through a script is how `if is_npu:` branches start.")
    example = ("import torch\nimport torch_npu\n\ntorch_npu.npu.set_compile_mode(jit_compile=False)\n"
               "torch.npu.config.allow_internal_format = False\n")
    use_instead = ("import torchport\n\ntorchport.tune(jit_compile=False)\n"
                   "torchport.tune(allow_internal_format=False)\n")
    fix_notes = ("Safe: becomes `torchport.tune(<knob>=<value>)`: the knob is declared on the npu backend record "
                 "and applied there; on every other backend it is a no-op. Combine several into one call by hand "
                 "(`torchport.tune(jit_compile=False, allow_internal_format=False, cudnn_benchmark=True)`).")
    after_fix = ("fixed")

    def on_reference(self, ctx, node, qualname: str) -> None:
        knob = _KNOB_CALLS.get(qualname) or _KNOB_ASSIGNS.get(qualname)
        ctx.report(self, node, f"`{qualname}` exists only with torch_npu; use `torchport.tune({knob}=...)`")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        arg = keyword(node, "jit_compile") or positional(node, 0)
        if arg is None or len(node.args) != 1 or not call_args_plain(node):
            return self.on_reference(ctx, node, qualname)
        ctx.report(self, node, f"`{qualname}` exists only with torch_npu; use `torchport.tune(jit_compile=...)`",
                   fix=lambda n: tune_statement(ctx, "jit_compile", n.args[0].value).value)

    def on_assign(self, ctx, node: cst.Assign, qualname: str) -> None:
        knob = _KNOB_ASSIGNS[qualname]
        report_tune_assign(self, ctx, node, knob, f"`{qualname}` exists only with torch_npu; use `torchport.tune({knob}=...)`")


class BackendVisibleDevices(Rule):
    code = "TP607"
    name = "backend-visible-devices"
    strings = ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")
    needles = ("VISIBLE_DEVICES", "ZE_AFFINITY_MASK")
    summary = "Finds `ASCEND_RT_VISIBLE_DEVICES` (and Intel's `ZE_AFFINITY_MASK`) read or set from Python."
    why = "Each backend has its own variable: setting the Ascend one restricts nothing on a GPU machine."
    example = 'import os\n\nos.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"\n'
    use_instead = ('import os\nimport torchport\n\nenv = torchport.current().backend.visible_devices_env\n'
                   'if env:\n    os.environ[env] = "0,1"\n')
    fix_notes = "No fix: choose devices with the launcher (torchrun) or `TORCHPORT_DEVICE`, or use the code above."
    after_fix = ("reported only -- harmless because setting or reading an environment variable works everywhere, and it restricts Ascend (or Intel) devices only")

    def on_string(self, ctx, node, value: str) -> None:
        ctx.report(self, node, f"`{value}` restricts one backend only; use "
                               "`torchport.current().backend.visible_devices_env`")


class MpsAvailability(Rule):
    code = "TP608"
    name = "mps-availability"
    severity = "warning"
    fix = "safe"
    names = ("torch.backends.mps.is_available", "torch.backends.mps.is_built")
    needles = ("backends.mps",)
    summary = "Finds `torch.backends.mps.is_available()` / `is_built()` (the `cuda ... elif mps ... else cpu` chains)."
    why = ("The chain `if torch.cuda.is_available(): ... elif torch.backends.mps.is_available(): ...` names every "
           "backend the author owned and no other: an NPU or XPU machine falls through to the CPU.")
    example = ('import torch\n\nif torch.backends.mps.is_available():\n    device = torch.device("mps")\n'
               'else:\n    device = torch.device("cpu")\n')
    use_instead = ("import torch\nimport torchport\n\nif torchport.current().is_accelerator:\n"
                   "    device = torch.device(\"mps\")\nelse:\n"
                   "    device = torch.device(\"cpu\")\n")
    fix_notes = ("Safe: becomes `torchport.current().is_accelerator` (on a Mac torchport selects mps, so the branch "
                 "is taken as before); with TP602 the branch's `\"mps\"` becomes the selected device, so every "
                 "branch of the chain lands on it. Collapse the chain to `device = torchport.device()` by hand.")
    after_fix = ("fixed (`torch.backends.mps.is_built()` now answers whether an accelerator is selected (True on the npu after fix, False under `run`: the faithful answer on the Mac it was written for)")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        ctx.report(self, node, f"`{qualname}()` asks about one backend; use `torchport.current().is_accelerator`",
                   fix=lambda n: ctx.expr(f"{ctx.tp}.current().is_accelerator"))

    def on_reference(self, ctx, node, qualname: str) -> None:
        ctx.report(self, node, f"`{qualname}` asks about one backend; use `torchport.current().is_accelerator`")


_FLAG = backend_flag_pattern("mps|npu|xpu")


class BackendFlag(Rule):
    code = "TP609"
    name = "backend-flag"
    severity = "warning"
    methods = ("add_argument",)
    needles = ("-mps", "-npu", "-xpu", "_mps", "_npu", "_xpu")
    summary = "Finds `--mps` / `--no-mps` / `--npu` / `--use-xpu` command-line flags."
    why = ("A flag per backend can only choose between that backend and the CPU: the script has no way to run on "
           "the team's other accelerators, and each new backend adds a flag and a branch.")
    example = 'parser.add_argument("--no-mps", action="store_true")\n'
    use_instead = DEVICE_FLAG_INSTEAD
    fix_notes = "No fix: the flag is part of the script's interface; replace it by hand (see above)."
    after_fix = ("reported only -- harmless because a command-line flag does nothing itself: the device built from it is fixed by TP602")

    def on_method(self, ctx, node: cst.Call, name: str) -> None:
        report_backend_flags(self, ctx, node, _FLAG, "one backend")
