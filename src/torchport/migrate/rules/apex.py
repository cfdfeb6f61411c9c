"""The whole-file rewrite of NVIDIA's / Ascend's apex AMP into ``torch.amp`` (rule TP210).

apex keeps one global AMP state, so its calls may sit far apart; a fix is sound only when all of
them can move together. The plan, made once per file:

* ``model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=...)`` becomes
  ``model = torchport.autocast_forward(model)`` (the forward under ``torch.autocast`` fp16, float32
  outputs: where apex O1 ran the loss) and ``scaler = torch.amp.GradScaler(<device type>[, init_scale=S])``
  -- preceded by ``global scaler`` when other functions use it (the ImageNet/ModelZoo layout: initialize in
  ``main_worker``, ``scale_loss`` in ``train``), as apex's own state is global;
  ``O0`` / ``enabled=False`` give a disabled scaler and no autocast;
* ``with amp.scale_loss(loss, optimizer) as scaled: scaled.backward()`` becomes
  ``scaler.scale(loss).backward()`` (other bodies: ``scaled = scaler.scale(loss)`` then the body);
* every ``optimizer.step()`` statement in the same function becomes ``scaler.step(optimizer)`` and
  ``scaler.update()`` (``scaler.update(S)`` for a static ``loss_scale=S``: the scale stays put);
* ``amp.master_params(optimizer)`` becomes the optimizer's parameters, preceded by
  ``scaler.unscale_(optimizer)`` (apex hands out unscaled gradients for clipping);
* ``amp.state_dict()`` / ``amp.load_state_dict(s)`` become the scaler's (the layout differs from apex's:
  that one is an unsafe fix, a checkpoint written before the migration does not load).

Unsafe (the user opts in): ``O2``, a run-time ``opt_level`` or ``loss_scale`` (``args.loss_scale``),
``num_losses`` > 1, ``amp.load_state_dict``, a plain ``loss.backward()`` beside a step that now goes through
the scaler. Anything else (several ``initialize`` calls, a ``loss_scale`` expression other than a literal or
a name, ``O3``, a ``scale_loss`` without an ``optimizer.step()`` beside it, other apex APIs) leaves the whole
file's apex code as it is, with a finding that names the line and what to do by hand.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from torchport.migrate.resolve import assigned_names, param_names

__all__ = ["plan_apex", "ApexPlan", "line_of"]

_IGNORED_KWARGS = frozenset({"combine_grad", "verbosity", "keep_batchnorm_fp32", "num_losses"})
_OPT_LEVELS = ("O0", "O1", "O2", "O3")


@dataclasses.dataclass
class ApexPlan:
    """What to report: with no ``problems``, the ``findings`` (node, message, fix) rewrite the file's apex AMP
    together at ``safety``; otherwise each problem is reported (no fix) and the other ``handled_uses`` too."""

    findings: list[tuple[cst.CSTNode, str, object]] = dataclasses.field(default_factory=list)
    problems: list[tuple[cst.CSTNode, str]] = dataclasses.field(default_factory=list)
    safety: str = "safe"
    #: why the fix is unsafe (added to the messages)
    notes: list[str] = dataclasses.field(default_factory=list)
    handled_uses: list[cst.CSTNode] = dataclasses.field(default_factory=list)
    #: uses that run nothing of apex (claimed, never reported)
    quiet: list[cst.CSTNode] = dataclasses.field(default_factory=list)
    #: one node per apex use (the call, or the reference), reported when the file cannot be fixed
    uses: list[cst.CSTNode] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Use:
    call: cst.Call
    qual: str
    scope: cst.CSTNode          # innermost FunctionDef, or the Module
    stack: tuple                # ancestors, outermost first


def _harmless(use: "_Use") -> bool:
    """A use of the apex name that runs nothing of apex: a rebinding (``amp = None``, the import fallback) or a
    dunder attribute (``"state_dict" in amp.__dict__``, a probe)."""
    node = use.call
    if isinstance(node, cst.Attribute) and node.attr.value.startswith("__"):
        return True
    return bool(use.stack) and isinstance(use.stack[-1], cst.AssignTarget) and use.stack[-1].target is node


class _Walk(cst.CSTVisitor):
    """Every apex.amp use with its ancestors; every ``x.step()`` statement with its scope."""

    def __init__(self, ctx) -> None:
        super().__init__()
        self.ctx = ctx
        self.stack: list[cst.CSTNode] = []
        self.uses: list[_Use] = []
        self.steps: list[tuple[cst.SimpleStatementLine, cst.CSTNode, str]] = []
        self.step_texts: list[tuple[cst.CSTNode, str]] = []
        self.names: set[str] = set()
        #: ``x.backward(...)`` calls with their ancestors (a plain backward beside a routed step is a hazard)
        self.backwards: list[tuple[cst.Call, tuple]] = []
        #: apex import lines below the module level (``try: from apex import amp`` in a function), with ancestors
        self.nested_imports: list[tuple[cst.SimpleStatementLine, tuple]] = []

    def scope(self) -> cst.CSTNode:
        return next((n for n in reversed(self.stack) if isinstance(n, cst.FunctionDef)), self.stack[0])

    def on_visit(self, node: cst.CSTNode) -> bool:
        code = self.ctx.module.code_for_node
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            line = self.stack[-1]
            module = code(node.module) if isinstance(node, cst.ImportFrom) and node.module is not None else ""
            names = [code(a.name) for a in node.names] if not isinstance(node.names, cst.ImportStar) else ["*"]
            apex = (module == "apex" and names == ["amp"]) or (not module and names in (["apex"], ["apex.amp"]))
            if (apex and not node.relative if isinstance(node, cst.ImportFrom) else apex) and len(line.body) == 1 \
                    and not (len(self.stack) >= 2 and isinstance(self.stack[-2], cst.Module)):
                self.nested_imports.append((line, tuple(self.stack[:-1])))
            self.stack.append(node)  # on_leave pops it
            return False
        if isinstance(node, cst.Name):
            self.names.add(node.value)
        parent = self.stack[-1] if self.stack else None
        if isinstance(node, (cst.Name, cst.Attribute)) and not (
                isinstance(parent, cst.Attribute) and parent.attr is node) and not (
                isinstance(parent, cst.Arg) and parent.keyword is node):
            q = self.ctx.qualname(node)
            inside_import = any(isinstance(n, (cst.Import, cst.ImportFrom)) for n in self.stack)
            if (q is not None and (q == "apex.amp" or q.startswith("apex.amp.")) and not inside_import
                    and not (isinstance(parent, cst.Attribute) and parent.value is node)):
                call = parent if isinstance(parent, cst.Call) and parent.func is node else None
                self.uses.append(_Use(call if call is not None else node, q if call is not None else "", self.scope(),
                                      tuple(self.stack)))
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            self.backwards.append((node, tuple(self.stack)))
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "step":
            line = self.stack[-2] if len(self.stack) >= 2 else None
            receiver = code(node.func.value)
            if (isinstance(parent, cst.Expr) and parent.value is node and isinstance(line, cst.SimpleStatementLine)
                    and len(line.body) == 1 and not node.args):
                self.steps.append((line, self.scope(), receiver))
            else:
                self.step_texts.append((self.scope(), receiver))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _literal(expr: cst.BaseExpression | None):
    """The value of a str / int / float / True / False literal, else a sentinel."""
    if expr is None:
        return None
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return _UNKNOWN


_UNKNOWN = object()


def _statement(use: _Use) -> cst.CSTNode | None:
    """The statement (a line or a compound statement) the use sits in."""
    return next((n for n in reversed(use.stack) if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement))),
                None)


def _line(code: str) -> cst.SimpleStatementLine:
    return cst.parse_statement(code)


def plan_apex(ctx) -> ApexPlan:
    """Decide the file's apex rewrite (see the module docstring)."""
    walk = _Walk(ctx)
    ctx.module.visit(walk)
    plan = ApexPlan()
    # `amp = None` (the import fallback), `"x" in amp.__dict__` (a probe): nothing of apex runs there
    plan.quiet = [u.call for u in walk.uses if _harmless(u)]
    walk.uses = [u for u in walk.uses if not _harmless(u)]
    code = ctx.module.code_for_node

    def problem(node: cst.CSTNode, msg: str) -> None:
        plan.problems.append((node, msg))

    inits = [u for u in walk.uses if u.qual == "apex.amp.initialize"]
    scales = [u for u in walk.uses if u.qual == "apex.amp.scale_loss"]
    masters = [u for u in walk.uses if u.qual == "apex.amp.master_params"]
    dicts = [u for u in walk.uses if u.qual in ("apex.amp.state_dict", "apex.amp.load_state_dict")]
    for u in walk.uses:
        if u not in inits + scales + masters + dicts:
            problem(u.call, f"`{code(u.call)}`: no torch.amp counterpart is written for this apex use; "
                            "rewrite it with `torch.amp.GradScaler` by hand")
    if len(inits) != 1:
        for u in inits:
            problem(u.call, f"{len(inits)} `amp.initialize` calls: the fix writes one GradScaler; "
                            "merge them by hand (one `torch.amp.GradScaler` per optimizer group)")
        if not inits and walk.uses:
            for u in scales + masters + dicts:
                problem(u.call, "no `amp.initialize` in this file: create the `torch.amp.GradScaler` by hand and "
                                "use `scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`")
        return plan
    init = inits[0]
    call = init.call
    stmt = init.stack[-2] if len(init.stack) >= 2 else None
    line = init.stack[-3] if len(init.stack) >= 3 else None
    args = [a for a in call.args if a.keyword is None]
    kwargs = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    opt_level = _literal(kwargs.get("opt_level")) if "opt_level" in kwargs else "O1"
    loss_scale = _literal(kwargs.get("loss_scale"))
    enabled = _literal(kwargs.get("enabled")) if "enabled" in kwargs else True
    unknown = sorted(set(kwargs) - _IGNORED_KWARGS - {"opt_level", "loss_scale", "enabled", "models", "optimizers"})
    targets = None
    if isinstance(stmt, cst.Assign) and stmt.value is call and len(stmt.targets) == 1:
        t = stmt.targets[0].target
        targets = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
    if any(a.star for a in call.args) or "models" in kwargs or "optimizers" in kwargs or not 1 <= len(args) <= 2:
        problem(call, "`amp.initialize` with other than `(model, optimizer, **options)`: fix by hand")
    elif not isinstance(line, cst.SimpleStatementLine) or targets is None or len(targets) != len(args) or any(
            code(t) != code(a.value) for t, a in zip(targets, args)) or not all(
            isinstance(a.value, (cst.Name, cst.Attribute)) or isinstance(a.value, (cst.List, cst.Tuple)) and all(
                isinstance(e.value, (cst.Name, cst.Attribute)) for e in a.value.elements) for a in args):
        problem(call, "`amp.initialize` is not a `model, optimizer = amp.initialize(model, optimizer, ...)` "
                      "statement: write `model = torchport.autocast_forward(model)` and "
                      "`scaler = torch.amp.GradScaler(torchport.current().type)` by hand")
    if unknown:
        problem(call, f"`amp.initialize(..., {', '.join(unknown)}=...)` has no torch.amp counterpart: fix by hand")
    if _literal(kwargs.get("num_losses")) not in (None, 1):
        plan.safety = "unsafe"
        plan.notes.append("one GradScaler serves every loss: apex keeps one per `loss_id` (`num_losses`), so the "
                          "scales differ after an overflow of one loss")
    level_expr = None  # `opt_level=args.fp16_opt_level`: decided when the script runs
    if opt_level is _UNKNOWN and enabled is True:
        level_expr = code(kwargs["opt_level"])
        plan.safety = "unsafe"
        plan.notes.append(f"`opt_level={level_expr}` is known only at run time: anything but \"O0\" becomes O1 "
                          "(autocast with fp32 weights; apex O2 keeps an fp16 model, O3 trains in pure fp16)")
    elif opt_level not in _OPT_LEVELS:
        problem(call, "`opt_level` is not \"O0\"-\"O3\": write `torchport.autocast_forward(model)` "
                      "(O1/O2) or nothing (O0) and a `torch.amp.GradScaler` by hand")
    elif opt_level == "O3":
        problem(call, "apex O3 trains in pure fp16 (no fp32 master weights), which torch.amp has no mode for: "
                      "use O1 semantics (`torchport.autocast_forward(model)` + `torch.amp.GradScaler`) by hand")
    scale_expr = None  # `loss_scale=args.loss_scale`: a number when the script runs, read at every update
    if loss_scale is _UNKNOWN and isinstance(kwargs["loss_scale"], (cst.Name, cst.Attribute)):
        scale_expr = code(kwargs["loss_scale"])
        plan.safety = "unsafe"
        plan.notes.append(f"`loss_scale={scale_expr}` is taken for a number (a static scale); apex also accepts "
                          "\"dynamic\" there")
    elif loss_scale is _UNKNOWN or not (loss_scale is None or loss_scale == "dynamic"
                                        or isinstance(loss_scale, (int, float)) and not isinstance(loss_scale, bool)):
        problem(call, "`loss_scale` is not a literal number, \"dynamic\" or a name: pass it as "
                      "`torch.amp.GradScaler(..., init_scale=S)` and `scaler.update(S)` (static) by hand")
    if enabled is _UNKNOWN or not isinstance(enabled, bool):
        problem(call, "`enabled` is not a literal True/False: write `torch.amp.GradScaler(..., enabled=...)` and "
                      "guard `torchport.autocast_forward` by hand")
    on = enabled is True and (opt_level in ("O1", "O2") or level_expr is not None)
    static = repr(float(loss_scale)) if isinstance(loss_scale, (int, float)) and not isinstance(loss_scale, bool) \
        else scale_expr
    if opt_level == "O2":
        plan.safety = "unsafe"

    scaler = next((n for n in ("scaler", "amp_scaler", "grad_scaler") if n not in walk.names and n not in ctx.aliases),
                  None)
    if scaler is None:
        problem(call, "the names `scaler`, `amp_scaler` and `grad_scaler` are all taken: fix by hand")

    # apex's state is global: a scaler created in one function and used in another becomes a module global
    shared = isinstance(init.scope, cst.FunctionDef) and any(
        u.scope is not init.scope for u in scales + masters + dicts)

    # scale_loss: `with amp.scale_loss(loss, optimizer) as scaled:` with an `optimizer.step()` beside it
    scaled_opts: dict[tuple[int, str], None] = {}
    scale_withs: list[tuple[cst.With, cst.CSTNode]] = []
    for u in scales:
        with_ = _statement(u)
        sargs = [a for a in u.call.args if a.keyword is None]
        skw = {a.keyword.value for a in u.call.args if a.keyword is not None}
        if not (isinstance(with_, cst.With) and len(with_.items) == 1 and with_.items[0].item is u.call
                and with_.asynchronous is None and with_.items[0].asname is not None
                and isinstance(with_.items[0].asname.name, cst.Name) and isinstance(with_.body, cst.IndentedBlock)):
            problem(u.call, "`amp.scale_loss` outside `with amp.scale_loss(loss, optimizer) as scaled_loss:`: "
                            "write `scaler.scale(loss).backward()` by hand")
            continue
        if len(sargs) != 2 or skw - {"loss_id"} or any(a.star for a in u.call.args):
            problem(u.call, "`amp.scale_loss` with options other than `(loss, optimizer)` (delay_unscale, "
                            "several optimizers): rewrite with `scaler.scale(loss).backward()` by hand")
            continue
        opt = code(sargs[1].value)
        if not any(s[1] is u.scope and s[2] == opt for s in walk.steps):
            problem(u.call, f"no `{opt}.step()` statement in the function of `amp.scale_loss` (line "
                            f"{line_of(ctx, u.call)}): add `scaler.step({opt})` and `scaler.update()` where it steps")
            continue
        if any(s[0] is u.scope and s[1] == opt for s in walk.step_texts):
            problem(u.call, f"`{opt}.step(...)` is called with arguments or inside an expression: route it "
                            f"through `scaler.step({opt})` and `scaler.update()` by hand")
            continue
        scaled_opts[(id(u.scope), opt)] = None
        scale_withs.append((with_, u.scope))
        plan.findings.append((with_, "apex `amp.scale_loss`: becomes `scaler.scale(loss).backward()`",
                              _with_fix(scaler, with_.items[0].asname.name.value)))
    # A plain `loss.backward()` in a function whose steps now go through the scaler: scaler.step() would unscale
    # gradients that were never scaled. Harmless only as the `else:` of `if <amp>: with amp.scale_loss(...)` (the
    # ModelZoo `--amp` switch, where the scaler is disabled when apex was not initialised).
    for call_, stack in walk.backwards:
        scope = next((n for n in reversed(stack) if isinstance(n, cst.FunctionDef)), stack[0])
        if not any(sc is scope for _, sc in scale_withs) or any(w in stack for w, _ in scale_withs):
            continue
        switched = any(isinstance(n, cst.If) and isinstance(n.orelse, cst.Else) and n.orelse in stack
                       and any(_contains(n.body, w) for w, _ in scale_withs) for n in stack)
        if not switched:
            plan.safety = "unsafe"
            plan.notes.append(f"`{code(call_)}` (line {line_of(ctx, call_)}) back-propagates without the scaler in "
                              "a function whose `optimizer.step()` now goes through it: make that path call "
                              "`scaler.scale(loss).backward()` or keep its own `optimizer.step()`")
    root = kwargs["loss_scale"] if scale_expr is not None else None
    while isinstance(root, cst.Attribute):
        root = root.value
    for line_, scope, receiver in walk.steps:
        if (scale_expr is not None and (id(scope), receiver) in scaled_opts and scope is not init.scope
                and not _visible(ctx, scope, root)):
            problem(line_, f"`loss_scale={scale_expr}` is not visible in the function of `{receiver}.step()` (line "
                           f"{line_of(ctx, line_)}): pass the scale there and call `scaler.update(S)` by hand")
            continue
        if (id(scope), receiver) in scaled_opts:
            update = f"{scaler}.update({static})" if static is not None and on else f"{scaler}.update()"
            plan.findings.append((line_, f"`{receiver}.step()` after apex `scale_loss`: becomes "
                                         f"`{scaler}.step({receiver})` + `{update}`",
                                  _flatten(lambda u=update, r=receiver: [f"{scaler}.step({r})", u])))
    seen_master: set[tuple[int, str]] = set()
    for u in masters:
        margs = [a for a in u.call.args if a.keyword is None]
        opt = code(margs[0].value) if len(margs) == 1 and len(u.call.args) == 1 else None
        key = (id(u.scope), opt)
        if opt is None or key not in scaled_opts or key in seen_master:
            problem(u.call, "`amp.master_params` not beside one `scale_loss` of the same optimizer: call "
                            "`scaler.unscale_(optimizer)` before clipping the optimizer's parameters by hand")
            continue
        seen_master.add(key)
        st = _statement(u)
        params = f"[p for group in {opt}.param_groups for p in group[{ctx.quote}params{ctx.quote}]]"
        plan.findings.append((u.call, "apex `amp.master_params`: becomes the optimizer's parameters",
                              lambda n, p=params: cst.parse_expression(p)))
        plan.findings.append((st, f"apex hands out unscaled gradients at `amp.master_params`: "
                                  f"`{scaler}.unscale_({opt})` goes before this statement",
                              _prepend(lambda o=opt: [f"{scaler}.unscale_({o})"])))
    for u in dicts:
        method = u.qual.rsplit(".", 1)[1]
        if method == "load_state_dict":
            plan.safety = "unsafe"
        plan.findings.append((u.call.func, f"apex `amp.{method}`: becomes the GradScaler's `{method}` (its layout "
                                           "differs from apex's: a checkpoint saved before the migration does not "
                                           "load)", lambda n, m=method: cst.parse_expression(f"{scaler}.{m}")))
    # the initialize statement itself
    if not plan.problems:
        first = args[0].value  # `model` or `[netD, netG]`
        models = [code(e.value) for e in first.elements] if isinstance(first, (cst.List, cst.Tuple)) else [code(first)]

        def lines() -> list[str]:  # ctx.tp / ctx.torch add their imports: call only when the fix runs
            dev = f"{ctx.tp}.current().type"
            extra = "" if on else ", enabled=False"
            if level_expr is not None:
                extra = f", enabled={level_expr} != \"O0\""
            if on and static is not None:
                extra += f", init_scale={static}"
            out = [f"global {scaler}"] if shared and top is line else []
            if level_expr is not None:
                out.append(f"if {level_expr} != \"O0\":\n" + "".join(
                    f"    {m} = {ctx.tp}.autocast_forward({m})\n" for m in models))
            elif on:
                out.extend(f"{m} = {ctx.tp}.autocast_forward({m})" for m in models)
            return out + [f"{scaler} = {ctx.torch}.amp.GradScaler({dev}{extra})"]

        what = {"O0": "O0: no AMP", "O1": "O1", "O2": "O2 (as O1: the weights stay fp32 and autocast casts per "
                "op, where apex casts the model to fp16 with fp32 master weights; results agree to fp16 rounding)"}
        level = what.get(opt_level, level_expr) if enabled is True else "enabled=False: no AMP"
        plan.findings.insert(0, (line, f"apex `amp.initialize` ({level}): becomes "
                                       f"{'`torchport.autocast_forward(model)` + ' if on else ''}"
                                       f"`torch.amp.GradScaler`", _flatten(lines)))
        # `if args.amp: model, optimizer = amp.initialize(...)`: a disabled scaler before the `if` keeps the
        # steps outside it (`scaler.step(optimizer)`) plain optimizer steps, as apex's were
        top = _top_statement(init)
        if top is not line:
            def off() -> list[str]:
                return [*([f"global {scaler}"] if shared else []),
                        f"{scaler} = {ctx.torch}.amp.GradScaler({ctx.tp}.current().type, enabled=False)"]
            plan.findings.append((top, "apex `amp.initialize` runs only in this statement: a disabled "
                                       "GradScaler goes before it", _prepend(off)))
    if not plan.problems:
        _drop_nested_imports(plan, walk)
    plan.uses = [u.call for u in walk.uses]
    plan.handled_uses = [n for u in walk.uses for n in ((u.call, u.call.func) if u.qual else (u.call,))]
    return plan


def _drop_nested_imports(plan: ApexPlan, walk: _Walk) -> None:
    """``from apex import amp`` below the module level goes (the engine drops module-level ones): a ``try:`` that
    only imports apex and only re-raises (``raise ImportError("Please install apex ...")``) goes whole; a lone
    import line becomes ``pass`` when it is all its block holds. Other ``try:`` blocks (a fallback flag) stay."""
    for line, stack in walk.nested_imports:
        block, owner = stack[-1], stack[-2] if len(stack) >= 2 else None
        if isinstance(owner, cst.Try):
            only_imports = all(any(line is l2 for l2, _ in walk.nested_imports) for l2 in block.body)
            reraise = all(len(h.body.body) == 1 and isinstance(h.body.body[0], cst.SimpleStatementLine)
                          and isinstance(h.body.body[0].body[0], cst.Raise) for h in owner.handlers)
            if only_imports and reraise and owner.orelse is None and owner.finalbody is None and owner.body is block:
                if not any(n is owner for n, _, _ in plan.findings):
                    plan.findings.append((owner, "the apex import is no longer needed: the `try:` goes",
                                          lambda n: cst.RemovalSentinel.REMOVE))
            continue
        if isinstance(block, cst.IndentedBlock):
            alone = len(block.body) == 1
            plan.findings.append((line, "the apex import is no longer needed",
                                  (lambda n: n.with_changes(body=[cst.Pass()])) if alone
                                  else (lambda n: cst.RemovalSentinel.REMOVE)))


def _visible(ctx, scope: cst.CSTNode, root: cst.CSTNode | None) -> bool:
    """True when the name ``root`` (of ``args.loss_scale``) is bound in ``scope`` (a parameter or an assignment of
    that function) or at module level."""
    if not isinstance(root, cst.Name):
        return False
    bound = assigned_names(cst.IndentedBlock(body=list(ctx.module.body)))  # module level, `if __name__` included
    if isinstance(scope, cst.FunctionDef):
        bound = bound | param_names(scope.params) | assigned_names(scope.body)
    return root.value in bound


def _contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    """True when ``node`` is ``tree`` or inside it."""
    found = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if n is node:
                found.append(n)
            return not found

    tree.visit(_Find())
    return bool(found)


def line_of(ctx, node: cst.CSTNode) -> int:
    """The line ``node`` starts on."""
    from torchport.migrate.positions import positions

    return positions(ctx.module, [node])[node][0]


def _top_statement(use: _Use) -> cst.CSTNode:
    """The statement of ``use``'s scope body that holds it."""
    i = use.stack.index(use.scope)
    after = use.stack[i + 1]  # a statement of the Module, or the IndentedBlock of a function
    return use.stack[i + 2] if isinstance(after, cst.IndentedBlock) else after


def _flatten(lines):
    def fix(n: cst.SimpleStatementLine):
        new = [_line(x) for x in lines()]
        new[0] = new[0].with_changes(leading_lines=n.leading_lines)
        new[-1] = new[-1].with_changes(trailing_whitespace=n.trailing_whitespace)
        return cst.FlattenSentinel(new)
    return fix


def _prepend(lines):
    def fix(n):
        new = [_line(x) for x in lines()]
        new[0] = new[0].with_changes(leading_lines=n.leading_lines)
        return cst.FlattenSentinel([*new, n.with_changes(leading_lines=())])
    return fix


def _with_fix(scaler: str, name: str):
    """``with amp.scale_loss(loss, opt) as s:`` + body -> ``scaler.scale(loss).backward()`` (or ``s = ...`` + body)."""
    def fix(n: cst.With):
        loss = next(a for a in n.items[0].item.args if a.keyword is None).value
        scaled = cst.Call(func=cst.parse_expression(f"{scaler}.scale"), args=[cst.Arg(loss)])
        body = list(n.body.body)
        only = body[0] if len(body) == 1 else None
        if (isinstance(only, cst.SimpleStatementLine) and len(only.body) == 1 and isinstance(only.body[0], cst.Expr)
                and isinstance(only.body[0].value, cst.Call)
                and isinstance(only.body[0].value.func, cst.Attribute)
                and isinstance(only.body[0].value.func.value, cst.Name)
                and only.body[0].value.func.value.value == name
                and only.body[0].value.func.attr.value == "backward"):
            call = only.body[0].value
            new = only.with_changes(body=[cst.Expr(call.with_changes(func=call.func.with_changes(value=scaled)))],
                                    leading_lines=n.leading_lines)
            return new
        first = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], scaled)],
                                        leading_lines=n.leading_lines)
        return cst.FlattenSentinel([first, *body])
    return fix
