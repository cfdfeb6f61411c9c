"""TP201-TP210: automatic mixed precision tied to CUDA.

Autocast fixes target ``torchport.autocast`` (``torch.autocast`` on the selected device type, in a
precision the backend runs fast: what ``torchport run`` does for the same line, so a CPU without native
bf16 runs the region in fp32 rather than ~10x slower); scaler fixes target ``torch.amp.GradScaler`` with the
selected device type. Both keep the user's arguments and loop structure intact.
"""

from __future__ import annotations

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.rules.base import comma as _comma
from torchport.migrate.rules.base import eq as _eq
from torchport.migrate.rules.base import Rule, call_args_plain, keyword, positional, with_args

__all__ = ["CudaAmpAutocast", "CudaAmpGradScaler", "AutocastCudaDevice", "GradScalerDefaultDevice", "ApexAmp"]

# torch.cuda.amp.autocast(enabled, dtype, cache_enabled) -- positional order differs in torch.amp.autocast
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
_TORCH_AUTOCAST_POSITIONAL = ("device_type", "dtype", "enabled", "cache_enabled")


def autocast_fix(ctx, positional_names: tuple[str, ...], drop: str | None = None):
    """The fix to ``torchport.autocast(<keywords>)`` for an autocast call whose positional arguments are
    ``positional_names`` (``drop``: the one naming the device type, left out), or None when its arguments do not
    allow one (``*args``, ``**kw``, more positionals than the signature has). ``--emit torch``:
    ``torch.amp.autocast(<the selected type>, <keywords>)`` (torch's own dtype rules, no policy)."""
    def fix(n: cst.Call) -> cst.Call:
        args, i = [], 0
        for arg in n.args:
            if arg.keyword is None:
                arg = arg.with_changes(keyword=cst.Name(positional_names[i]), equal=_eq())
                i += 1
            if arg.keyword.value != drop:
                args.append(arg)
        if ctx.emit_torch:
            return with_args(n.with_changes(func=ctx.expr(f"{ctx.torch}.amp.autocast")),
                             [cst.Arg(ctx.type_expr(), comma=_comma()), *args])
        return with_args(n.with_changes(func=ctx.expr(f"{ctx.tp}.autocast")), args)

    return fix


def report_autocast(rule: Rule, ctx, node: cst.Call, msg: str) -> None:
    """Report an autocast call, with a fix to ``torchport.autocast(...)`` when its arguments allow one."""
    if not call_args_plain(node) or sum(a.keyword is None for a in node.args) > len(_AUTOCAST_POSITIONAL):
        ctx.report(rule, node, msg)
        return
    ctx.report(rule, node, msg, fix=autocast_fix(ctx, _AUTOCAST_POSITIONAL))


class CudaAmpAutocast(Rule):
    code = "TP201"
    name = "cuda-amp-autocast"
    fix = "safe"
    names = ("torch.cuda.amp.autocast",)
    summary = "Finds `torch.cuda.amp.autocast(...)` (also imported as `from torch.cuda.amp import autocast`)."
    why = ("The CUDA autocast context is deprecated and only casts CUDA ops: on an NPU or XPU it silently runs "
           "the model in fp32, so the mixed-precision speed-up disappears without an error.")
    example = "from torch.cuda.amp import autocast\n\nwith autocast():\n    loss = model(x)\n"
    use_instead = "import torchport\n\nwith torchport.autocast():\n    loss = model(x)\n"
    fix_notes = ("Safe: becomes `torchport.autocast(...)` -- `torch.autocast` on the selected device type -- with "
                 "positional arguments as keywords (`enabled=`, `dtype=`, `cache_enabled=`); the import it no longer "
                 "needs is removed. The default dtype is the device's (fp16 on CUDA and NPU); a dtype the backend "
                 "does not run fast becomes its fallback, fp32 (autocast off) on a CPU without native bf16 -- what "
                 "`torchport run` does for the same line (backends/cpu_precision.py).")
    after_fix = ("fixed (a bare reference such as `ctx = torch.cuda.amp.autocast` is reported: rewrite its calls as `torchport.autocast(...)`)")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        report_autocast(self, ctx, node, "CUDA-only autocast; use `torchport.autocast()`")

    def on_reference(self, ctx, node, qualname: str) -> None:
        ctx.report(self, node, "CUDA-only autocast; use `torchport.autocast()`")


class CudaAmpGradScaler(Rule):
    code = "TP202"
    name = "cuda-amp-grad-scaler"
    fix = "safe"
    names = ("torch.cuda.amp.GradScaler",)
    summary = "Finds `torch.cuda.amp.GradScaler(...)`."
    why = ("The CUDA scaler disables itself with a warning when CUDA is missing, so fp16 training elsewhere runs "
           "without loss scaling and small gradients underflow to zero.")
    example = "from torch.cuda.amp import GradScaler\n\nscaler = GradScaler()\n"
    use_instead = "import torch\nimport torchport\n\nscaler = torch.amp.GradScaler(torchport.current().type)\n"
    fix_notes = ("Safe: becomes `torch.amp.GradScaler(torchport.current().type, ...)` with the same arguments; "
                 "references (annotations, isinstance) become `torch.amp.GradScaler`. "
                 "`torchport.Amp(\"fp16\")` adds a scaler only where the backend needs one.")
    after_fix = ("fixed")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        def fix(n: cst.Call) -> cst.Call:
            return with_args(n.with_changes(func=ctx.expr(f"{ctx.torch}.amp.GradScaler")),
                             [cst.Arg(ctx.type_expr(), comma=_comma()), *n.args])

        ctx.report(self, node, "CUDA-only GradScaler; use `torch.amp.GradScaler(torchport.current().type)`", fix=fix)

    def on_reference(self, ctx, node, qualname: str) -> None:
        ctx.report(self, node, "CUDA-only GradScaler type; use `torch.amp.GradScaler`",
                   fix=lambda n: ctx.expr(f"{ctx.torch}.amp.GradScaler"))


class AutocastCudaDevice(Rule):
    code = "TP203"
    name = "autocast-cuda-device"
    fix = "safe"
    names = ("torch.amp.autocast", "functools.partial")
    needles = ("autocast",)
    # a partial acts only when its callee is `torch.autocast`: that argument, a reference to a name this rule
    # declares, marks the statement itself -- so `partial(nn.LayerNorm, ...)` does not
    fast_gated_names = ("functools.partial",)
    fast_call_gate = staticmethod(lambda call, qualname, bound: False)
    summary = ('Finds `torch.autocast("cuda")` / `torch.amp.autocast(device_type="cuda")`, and a `torch.autocast` whose '
               "device type is named at run time (`torch.autocast(device_type=device.type)`, also as "
               "`functools.partial(torch.autocast, device_type=...)`).")
    why = ("Autocast for the `cuda` device type does nothing for ops that run on another device. A device-agnostic "
           "`torch.autocast(device.type, dtype=torch.float16)` runs fp16 as asked on a CPU without native fp16/bf16 "
           "(~10x slower there, other numerics) where `torchport run` applies the backend's AMP policy (fp32): the "
           "fixed file and `run` would disagree.")
    example = 'import torch\n\nwith torch.autocast("cuda", dtype=torch.bfloat16):\n    loss = model(x)\n'
    use_instead = ("import torch\nimport torchport\n\n"
                   "with torchport.autocast(dtype=torch.bfloat16):\n    loss = model(x)\n")
    fix_notes = ("Safe: becomes `torchport.autocast(...)` with the other arguments as keywords -- the selected device "
                 "type, in a precision the backend runs fast (as `torchport run` does for the same line); with "
                 "`*args` / `**kwargs` only the device-type string becomes `torchport.current().type`. A device type "
                 "named at run time is kept as `device_type=` (`torchport.autocast(device_type=device.type, "
                 "dtype=...)`; in `functools.partial(torch.autocast, ...)` the callee becomes `torchport.autocast` "
                 "and its positional arguments keywords; an `enabled=False` region, and an expression that itself names a "
                 "device type (`device.type if device.type != 'mps' else 'cpu'`), are left alone): on CUDA and the NPU that is `torch.autocast` as asked, on a "
                 "CPU without native fp16/bf16 the region runs in fp32 -- what `run` does for the script's CUDA "
                 "device; a script that deliberately autocasts its CPU runs there in fp32 too (the backend's AMP "
                 "policy) instead of ~10x slower. `--emit torch` leaves a device type named at run time alone "
                 "(torch's form already).")
    after_fix = ("fixed (a bare reference such as `ctx = torch.autocast` is not rewritten: its calls keep torch's "
                 "argument order)")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if qualname == "functools.partial":
            return self._partial(ctx, node)
        arg = positional(node, 0) or keyword(node, "device_type")
        ds = ctx.device_string(arg.value) if arg is not None else None
        plain = call_args_plain(node) and sum(a.keyword is None for a in node.args) <= len(_TORCH_AUTOCAST_POSITIONAL)
        if ds is None:
            if arg is not None and plain and not ctx.emit_torch and not _literal(arg.value) and not _off(node) \
                    and not _chooses(arg.value):
                ctx.report(self, node, "autocast on a device type named at run time runs a precision the backend may "
                                       "not run fast; use `torchport.autocast(device_type=...)`",
                           fix=autocast_fix(ctx, _TORCH_AUTOCAST_POSITIONAL))
            return
        if ds.device_type != "cuda":
            return
        if plain:
            ctx.claim(arg.value)    # the "cuda" string goes with the call: one finding, not a TP104 as well
            ctx.report(self, node, 'autocast for "cuda" only; use `torchport.autocast()`',
                       fix=autocast_fix(ctx, _TORCH_AUTOCAST_POSITIONAL, drop="device_type"))
            return
        ctx.report(self, arg.value, 'autocast for "cuda" only; use `torchport.current().type`',
                   fix=lambda n: ctx.type_expr())

    def _partial(self, ctx, node: cst.Call) -> None:
        """``functools.partial(torch.autocast, <device type>, ...)`` -> ``functools.partial(torchport.autocast, ...)``
        (the partial's positional arguments after the callee as keywords, a ``"cuda"`` device type dropped)."""
        if ctx.emit_torch or not node.args or node.args[0].keyword is not None or not call_args_plain(node):
            return
        func = node.args[0].value
        if ctx.qualname(func) != "torch.amp.autocast":
            return
        rest = node.args[1:]
        if sum(a.keyword is None for a in rest) > len(_TORCH_AUTOCAST_POSITIONAL):
            return
        pos = [a for a in rest if a.keyword is None]
        arg = pos[0] if pos else next((a for a in rest if a.keyword is not None and a.keyword.value == "device_type"),
                                      None)
        if arg is None:     # the device type comes with each call: its order is torch's
            return
        ds = ctx.device_string(arg.value)
        if ds is not None and ds.device_type != "cuda" or ds is None and (_literal(arg.value) or _chooses(arg.value)):
            return
        if _off(node.with_changes(args=rest)):
            return          # an autocast-off region, as for a call: no precision to pick
        message = ("a partial of `torch.autocast` runs a precision the backend may not run fast; use "
                   "`functools.partial(torchport.autocast, ...)`")
        if len(pos) > 1:    # its later calls' positional arguments continue torch's order (enabled, ...), which
            ctx.claim(func)  # torchport.autocast's (dtype, enabled, ...) would shift: reported, not rewritten
            ctx.report(self, node, message + " (bind only the device type positionally to get a fix)")
            return
        drop = "device_type" if ds is not None else None
        ctx.claim(func, *([arg.value] if ds is not None else []))
        inner = autocast_fix(ctx, _TORCH_AUTOCAST_POSITIONAL, drop=drop)

        def fix(n: cst.Call) -> cst.Call:
            mapped = inner(n.with_changes(args=n.args[1:]))     # the autocast arguments, as keywords
            head = n.args[0].with_changes(value=ctx.expr(f"{ctx.tp}.autocast"))
            return with_args(n, [head.with_changes(comma=_comma()) if mapped.args else head, *mapped.args])

        ctx.report(self, node, message, fix=fix)


def _chooses(expr: cst.BaseExpression) -> bool:
    """A device-type expression that itself names a device type (``device.type if device.type != 'mps' else
    'cpu'``): the script picks among types there -- on a CPU host ``run`` takes its CPU branch and autocasts as
    asked -- so the line is left as written."""
    import libcst.matchers as m

    return any(s.evaluated_value in ("cpu", "cuda", "mps", "npu", "xpu")
               for s in m.findall(expr, m.SimpleString()) if isinstance(s, cst.SimpleString))


def _off(node: cst.Call) -> bool:
    """``enabled=False`` (or the third positional ``False``): a region that turns autocast off, no precision to pick."""
    arg = keyword(node, "enabled") or positional(node, 2)
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "False"


def _literal(expr: cst.BaseExpression) -> bool:
    """A string literal (``"cpu"``): a device type the script names itself."""
    return isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


class GradScalerDefaultDevice(Rule):
    code = "TP204"
    name = "grad-scaler-default-device"
    fix = "safe"
    names = ("torch.amp.GradScaler",)
    needles = ("GradScaler",)
    summary = 'Finds `torch.amp.GradScaler()` without a device (it defaults to "cuda") or with `"cuda"`.'
    why = ('`torch.amp.GradScaler()` means `GradScaler("cuda")`: on any other host it disables itself with only '
           "a warning, and fp16 gradients underflow.")
    example = "import torch\n\nscaler = torch.amp.GradScaler()\n"
    use_instead = "import torch\nimport torchport\n\nscaler = torch.amp.GradScaler(torchport.current().type)\n"
    fix_notes = "Safe: the selected device type is passed as the first argument (or replaces `\"cuda\"`)."
    after_fix = ("fixed")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        if not call_args_plain(node):
            return
        arg = positional(node, 0) or keyword(node, "device")
        if arg is None:
            ctx.report(self, node, 'GradScaler without a device defaults to "cuda"; pass `torchport.current().type`',
                       fix=lambda n: with_args(n, [cst.Arg(ctx.type_expr(), comma=_comma()), *n.args]))
            return
        ds = ctx.device_string(arg.value)
        if ds is not None and ds.device_type == "cuda":
            ctx.report(self, arg.value, 'GradScaler for "cuda" only; pass `torchport.current().type`',
                       fix=lambda n: ctx.type_expr())


class ApexAmp(Rule):
    code = "TP210"
    name = "apex-amp"
    severity = "error"
    fix = "safe"
    names = ("apex.amp",)
    name_prefixes = ("apex.amp.",)
    imports = ("apex",)
    needles = ("apex",)
    summary = ("Finds NVIDIA's and Ascend's apex AMP: `amp.initialize`, `amp.scale_loss`, `amp.master_params`, "
               "`amp.state_dict`, and fixes them together to `torch.amp`.")
    why = ("apex is a CUDA-only extension (and unmaintained; Ascend ships its own fork): without it the script "
           "does not start. torch has had native AMP since 1.6.")
    example = ("from apex import amp\n\nmodel, optimizer = amp.initialize(model, optimizer, opt_level=\"O1\", "
               "loss_scale=128.0)\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
               "    optimizer.zero_grad()\n    with amp.scale_loss(loss, optimizer) as scaled_loss:\n"
               "        scaled_loss.backward()\n    optimizer.step()\n")
    use_instead = ("import torch\nimport torchport\n\nmodel = torchport.autocast_forward(model)\n"
                   "scaler = torch.amp.GradScaler(torchport.current().type, init_scale=128.0)\n"
                   "for x, y in loader:\n    loss = criterion(model(x), y)\n    optimizer.zero_grad()\n"
                   "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update(128.0)\n")
    fix_notes = ("Safe when every apex call of the file can move together (apex keeps one global state): "
                 "`model, optimizer = amp.initialize(model, optimizer, opt_level=\"O1\", loss_scale=S)` becomes "
                 "`model = torchport.autocast_forward(model)` -- the model's forward under `torch.autocast` "
                 "(fp16) with float32 outputs, so the loss runs in fp32 as under apex; the module, its "
                 "`state_dict` keys and `model.module` are unchanged -- and `scaler = "
                 "torch.amp.GradScaler(torchport.current().type[, init_scale=S])` (dynamic scaling unless "
                 "`loss_scale` is a number; a name such as `args.loss_scale` is an unsafe fix, taken for a number "
                 "and passed to every `scaler.update(...)`), after `global scaler` when `amp.initialize` is in one function and "
                 "the other apex calls in others (the ImageNet / ModelZoo layout; apex's own state is global); "
                 "`O0` or `enabled=False` gives a disabled scaler and no autocast; "
                 "`combine_grad` (Ascend), `keep_batchnorm_fp32`, `verbosity` are dropped; lists of models "
                 "(`[netD, netG], [optD, optG] = amp.initialize([netD, netG], [optD, optG])`) get one "
                 "`autocast_forward` each and share the scaler (with `num_losses` > 1 an unsafe fix: apex keeps "
                 "one scaler per `loss_id`); an `amp.initialize` inside "
                 "`if args.amp:` gets a disabled scaler before the `if` (the other path's steps stay plain). "
                 "`from apex import amp` goes; inside a function, a `try:` around it that only re-raises "
                 "(`raise ImportError(\"Please install apex ...\")`) goes too. "
                 "`with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()` becomes "
                 "`scaler.scale(loss).backward()`, and each `optimizer.step()` statement in the same function "
                 "`scaler.step(optimizer)` + `scaler.update()` (`scaler.update(S)` keeps a static scale). "
                 "`amp.master_params(optimizer)` (gradient clipping) becomes `scaler.unscale_(optimizer)` before "
                 "the statement and the optimizer's parameters in it. `amp.state_dict()` becomes "
                 "`scaler.state_dict()`. Unsafe (applied with `--unsafe-fixes`): a run-time "
                 "`opt_level=args.opt_level` (becomes `if args.opt_level != \"O0\": model = "
                 "torchport.autocast_forward(model)` and `GradScaler(..., enabled=args.opt_level != \"O0\")`: "
                 "O2/O3 run as O1), `O2` (fixed as O1: apex casts "
                 "the model to fp16 with fp32 master weights, autocast keeps fp32 weights and casts per op -- "
                 "results agree to fp16 rounding), `amp.load_state_dict(s)` (the scaler's layout differs from "
                 "apex's `loss_scaler0`: a checkpoint written before the migration does not load) and a plain "
                 "`loss.backward()` in a function whose steps now go through the scaler (other than the `else:` "
                 "of `if args.amp: with amp.scale_loss(...)`), whose step would unscale unscaled gradients. Not fixed, "
                 "with a finding naming the line and the hand fix: `O3` (pure fp16), a `loss_scale` "
                 "that is neither a literal nor a name (or a name not visible where the optimizer steps), a "
                 "non-literal `enabled`, several `amp.initialize` calls, a `scale_loss` without an "
                 "`optimizer.step()` statement in its function, `delay_unscale`, other apex APIs. "
                 "The emulator's apex stand-in "
                 "(docs/emulator.md) runs the unfixed script with the same semantics.")
    after_fix = ("fixed (apex's own `opt_level` / `loss_scale` given at run time is unsafe or reported: the apex calls then stay, and run where apex runs, as under `run`)")

    def _plan(self, ctx):
        from torchport.migrate.rules.apex import line_of, plan_apex

        if self.code in ctx.memo:
            return
        plan = plan_apex(ctx)
        ctx.memo[self.code] = plan
        ctx.claim(*plan.quiet)
        if plan.problems:
            first = plan.problems[0]
            for node, msg in plan.problems:
                ctx.report(self, node, f"apex AMP not fixed: {msg}")
            done = {node for node, _ in plan.problems}
            for node in plan.uses:
                if node not in done:
                    ctx.report(self, node, "apex AMP (CUDA-only); not fixed because of the finding at line "
                                           f"{line_of(ctx, first[0])}: rewrite the file's apex calls with "
                                           "`torch.amp` together")
            ctx.claim(*plan.handled_uses)
            return
        note = f" (unsafe: {'; '.join(plan.notes)})" if plan.notes else ""
        for i, (node, msg, fix) in enumerate(plan.findings):
            ctx.report(self, node, msg + (note if i == 0 else ""), fix=fix, safety=plan.safety)
        ctx.claim(*plan.handled_uses)

    def on_import(self, ctx, node, module) -> None:
        self._plan(ctx)

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        self._plan(ctx)
        if not ctx.is_claimed(node):
            self.on_reference(ctx, node.func, qualname)

    def on_reference(self, ctx, node, qualname: str) -> None:
        self._plan(ctx)
        if not ctx.is_claimed(node):
            ctx.report(self, node, f"`{qualname}` (apex AMP) is CUDA-only; use `torch.amp` "
                                   "(`torchport.autocast_forward(model)` + `torch.amp.GradScaler`)")
