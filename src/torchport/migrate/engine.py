"""The scanner engine: one LibCST walk per file dispatches to the rules; fixes compose.

Flow for one file (:func:`analyze`):

1. text prefilter: a file that contains none of the enabled rules' needles
   (``cuda``, ``nccl``, ``pin_memory`` ...) cannot produce a finding and is not parsed;
2. parse with LibCST (a file that does not parse becomes a :class:`FileError`);
3. one visitor walk: imports resolve names (:mod:`torchport.migrate.resolve`), events
   go to the rules that declared them (:class:`RuleSet`), rules report through
   :class:`FileContext`; a reported node is *claimed*, so a more general rule does
   not report it again;
4. positions are computed only when something was found;
5. with ``fix=True``: one transformer pass applies the chosen fixes bottom-up (each
   fix receives the node with its children already rewritten), adds ``import
   torchport`` / ``import torch`` once (with ``emit="torch"`` first lowering the
   torchport spellings torch core has, :mod:`torchport.migrate.emit`), drops imports
   whose every use the rewrite replaced (``from torch.cuda.amp import autocast``), and checks that the result
   parses -- a rewrite that does not parse is discarded and reported, never returned.
"""

from __future__ import annotations

import ast
import dataclasses
import re

import libcst as cst

from torchport.migrate.context import LOOP_INDEX, FileContext, Fix, Reported, RuleSet
from torchport.migrate.emit import lower, message
from torchport.migrate.finding import FileError, FileResult, Finding, line_count
from torchport.migrate.imports import add_imports, count_names, drop_unused
from torchport.migrate.noqa import unused_noqa
from torchport.migrate.positions import positions
from torchport.migrate.resolve import CANONICAL, assigned_names, dotted, param_names
from torchport.migrate.rules.base import Site
from torchport.migrate.walk import FastVisitor

__all__ = ["RuleSet", "FileContext", "FastVisitor", "analyze", "Fix"]

_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log",
                          "write", "print", "echo", "set_description", "set_postfix_str"})
_QUIET_BUILTINS = frozenset({"print", "getattr", "hasattr", "setattr", "delattr", "warn", "echo"})
_TEXT = (cst.SimpleString, cst.ConcatenatedString)  # f-strings may hold calls: they stay visited
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z0-9]+(?:[,\s]+[A-Z0-9]+)*))?", re.IGNORECASE)


class _Scanner(FastVisitor):
    """The single walk: resolves names and hands events to the rules."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.rs = ctx.ruleset
        self._shadow_stack: list[frozenset[str]] = []
        self._func_done: cst.CSTNode | None = None

    # imports are bookkeeping, not uses (rules that declared ``imports`` see them)
    def visit_Import(self, node: cst.Import) -> bool:
        if self.rs.imports:
            self._import(node, [dotted(a.name) for a in node.names])
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if self.rs.imports and node.module is not None and not node.relative:
            self._import(node, [dotted(node.module)])
        return False

    def _import(self, node: cst.Import | cst.ImportFrom, modules: list[str | None]) -> None:
        for module in modules:
            root = (module or "").split(".", 1)[0]
            for rule in self.rs.imports.get(root, ()):
                rule.on_import(self.ctx, node, module)

    # -- scopes: a parameter or local assignment shadows an import inside the function ---------
    def _push(self, names: set[str]) -> None:
        self._shadow_stack.append(self.ctx.shadowed)
        hit = names.intersection(self.ctx.aliases)
        if hit:
            self.ctx.shadowed = self.ctx.shadowed | hit

    def _pop(self) -> None:
        self.ctx.shadowed = self._shadow_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = param_names(node.params)
        for name in params:
            self.ctx.note_param(name)
        self._push(params | assigned_names(node.body))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push(param_names(node.params))

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._pop()

    # -- calls ---------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> bool:
        ctx = self.ctx
        if node in ctx.claimed:
            return False
        func = node.func
        q = ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        self._func_done = func if q is not None else None
        if q is not None:
            root = func
            while isinstance(root, cst.Attribute):
                root = root.value
            _bump(ctx.alias_uses, root.value)
            callee: str | None = q
            for rule in self.rs.lookup(q):
                rule.on_call(ctx, node, q)
        elif isinstance(func, cst.Attribute):
            name = func.attr.value
            callee = "." + name
            for rule in self.rs.methods.get(name, ()):
                rule.on_method(ctx, node, name)
        else:
            callee = func.value if isinstance(func, cst.Name) else None
        if self._quiet(func, q):
            if callee == "getattr" and q is None and len(node.args) == 3 and not node.args[2].star:
                # getattr(args, "device", "cuda"): the default is a device held as data
                self._value(node.args[2].value, Site("arg", index=2, callee="getattr"))
            ctx.claim(*(a.value for a in node.args if isinstance(a.value, _TEXT)))
            return True
        if self.rs.values:
            index = 0
            for arg in node.args:
                if arg.star:
                    break
                if arg.keyword is not None:
                    self._value(arg.value, Site("arg", keyword=arg.keyword.value, callee=callee))
                else:
                    self._value(arg.value, Site("arg", index=index, callee=callee))
                    index += 1
        return True

    def _quiet(self, func: cst.BaseExpression, q: str | None) -> bool:
        """Arguments of print / logging / warnings / getattr-like calls are text, not devices."""
        if isinstance(func, cst.Attribute):
            return func.attr.value in _LOG_METHODS
        if isinstance(func, cst.Name):
            name = func.value
            return (q is None and name in _QUIET_BUILTINS) or name.endswith(("Error", "Exception", "Warning"))
        return False

    # -- names and attributes ------------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> bool:
        ctx = self.ctx
        if node is self._func_done or node in ctx.claimed:
            return False
        q = ctx.qualname(node)
        if q is not None:
            root = node.value
            while isinstance(root, cst.Attribute):
                root = root.value
            if isinstance(root, cst.Name):
                _bump(ctx.alias_uses, root.value)
            for rule in self.rs.lookup(q):
                rule.on_reference(ctx, node, q)
            return False
        rules = self.rs.attributes.get(node.attr.value)
        if rules:
            for rule in rules:
                rule.on_attribute(ctx, node)
        self.walk(node.value)  # the receiver; the attribute name is not a reference
        return False

    def visit_Name(self, node: cst.Name) -> None:
        ctx = self.ctx
        target = ctx.aliases.get(node.value)
        if target is not None:
            _bump(ctx.alias_uses, node.value)
        if target is None or node is self._func_done or node in ctx.claimed or node.value in ctx.shadowed:
            return
        q = CANONICAL.get(target, target)
        for rule in self.rs.lookup(q):
            rule.on_reference(ctx, node, q)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value in self.ctx.aliases:
            self.ctx.claim(node.keyword)  # f(autocast=...) is a keyword, not a use

    # -- strings in value positions -------------------------------------------------------
    def _value(self, expr: cst.BaseExpression | None, site: Site) -> None:
        if expr is None or not isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.BinaryOperation, cst.Call)):
            return
        ctx = self.ctx
        if expr in ctx.claimed:
            return
        ds = ctx.device_string(expr)
        if ds is None:
            return
        for rule in self.rs.values:
            if expr in ctx.claimed:
                return
            rule.on_value(ctx, expr, ds, site)

    def visit_Assign(self, node: cst.Assign) -> None:
        ctx = self.ctx
        for target in node.targets:
            self._bind(target.target, node.value)
        if self.rs.assignments and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Attribute):
            q = ctx.qualname(node.targets[0].target)
            for rule in self.rs.assignments.get(q, ()) if q is not None else ():
                rule.on_assign(ctx, node, q)
        self._value(node.value, Site("assign"))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)
        self._value(node.value, Site("assign"))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target, None)

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        counted = (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
                   and len(it.args) == 1 and ctx_text_has(self.ctx, it, "device_count"))
        self._bind(node.target, LOOP_INDEX if counted else None)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind(el.value, None)
        else:
            self.ctx.note_binding(target, value)

    def visit_Param(self, node: cst.Param) -> None:
        self._value(node.default, Site("default"))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(t.comparator for t in node.comparisons)]
        code = self.ctx.module.code_for_node
        for i, operand in enumerate(operands):
            other = operands[i + 1] if i + 1 < len(operands) else operands[i - 1]
            self._value(operand, Site("compare", subject=code(other)))
            if i and isinstance(operand, (cst.List, cst.Tuple, cst.Set)) and isinstance(
                    node.comparisons[i - 1].operator, (cst.In, cst.NotIn)):
                # d in ["cuda", "xpu"]: device types held as data; a list that names the npu already serves it
                found = [(e.value, self.ctx.device_string(e.value)) for e in operand.elements
                         if isinstance(e.value, cst.SimpleString)]
                if not any(ds is not None and ds.device_type == "npu" for _, ds in found):
                    for value, ds in found:
                        if ds is not None and ds.device_type == "cuda":
                            self._value(value, Site("compare", subject=code(other)))

    def visit_Return(self, node: cst.Return) -> None:
        self._value(node.value, Site("return"))

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._value(node.value, Site("dict-value"))

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        ctx = self.ctx
        if node in ctx.claimed:
            return False
        for rule in self.rs.if_exps:
            rule.on_if_exp(ctx, node)
        if node in ctx.claimed:
            return False
        self._value(node.body, Site("ifexp"))
        self._value(node.orelse, Site("ifexp"))
        return True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self.rs.strings or node in self.ctx.claimed:
            return
        raw = node.value
        for text, rules in self.rs.strings.items():
            if text in raw and node.evaluated_value == text:
                for rule in rules:
                    rule.on_string(self.ctx, node, text)

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        if node in self.ctx.claimed:
            return False
        self.ctx.fstring_quotes.append(node.start)
        return True

    def leave_FormattedString(self, node: cst.FormattedString) -> None:
        if self.ctx.fstring_quotes and self.ctx.fstring_quotes[-1] is node.start:
            self.ctx.fstring_quotes.pop()


def _bump(counts: dict[str, int], name: str) -> None:
    """One more use of ``name`` (through the base dict: the engine's own bookkeeping is not a rule's read)."""
    dict.__setitem__(counts, name, dict.get(counts, name, 0) + 1)


def ctx_text_has(ctx: FileContext, node: cst.CSTNode, text: str) -> bool:
    """True when the source of ``node`` contains ``text``."""
    return text in ctx.module.code_for_node(node)


class _Fixer(cst.CSTTransformer):
    """Applies fixes bottom-up: each gets the node with its children already rewritten."""

    def __init__(self, fixes: dict[cst.CSTNode, Fix]) -> None:
        super().__init__()
        self.fixes = fixes
        self.applied: set[cst.CSTNode] = set()
        self.failed: dict[cst.CSTNode, str] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        return True

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        fix = self.fixes.get(original_node)
        if fix is None:
            return updated_node
        try:
            new = fix(updated_node)
        except Exception as exc:  # a rule bug must not lose the user's file
            self.failed[original_node] = f"{type(exc).__name__}: {exc}"
            return updated_node
        self.applied.add(original_node)
        return new


def _noqa(lines: list[str], line: int, code: str) -> bool:
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    m = _NOQA.search(text) if "noqa" in text.lower() else None
    if m is None:
        return False
    codes = m.group("codes")
    wanted = [c.upper() for c in re.split(r"[,\s]+", codes or "") if c]
    wanted = ["TP" + c[3:] if c.startswith("TPT") else c for c in wanted]  # flake8 spelling
    return codes is None or any(code.startswith(c) for c in wanted)


def _error_line(source: str, exc: cst.ParserSyntaxError) -> int:
    """The line of a syntax error: LibCST's, or -- for its tokenizer errors, which all say line 1 -- Python's own."""
    if not exc.message.startswith("tokenizer error"):
        return exc.raw_line
    try:
        ast.parse(source)
    except SyntaxError as err:
        return err.lineno or exc.raw_line
    except (ValueError, RecursionError, MemoryError):
        pass
    return exc.raw_line


def analyze(source: str, path: str, ruleset: RuleSet, *, fix: bool = False, unsafe: bool = False,
            positions_after_fix: bool = False, emit: str = "torchport", sliced: str | None = None,
            dropped_keys: frozenset[str] = frozenset()) -> FileResult:
    """Scan (and optionally fix) one file's source.

    Args:
        source: the file's text.
        path: shown in findings.
        ruleset: what to run and report.
        fix: produce ``fixed_source`` with the applicable fixes.
        unsafe: also apply fixes marked unsafe.
        positions_after_fix: report remaining findings at their positions in the fixed
            text (use when the fixed text is written back); otherwise positions refer to
            ``source``.
        sliced: ``source`` with the statements no rule can fire in blanked (:mod:`torchport.migrate.fast`):
            walk that instead. When a rule used state a blanked statement could change, no result: None
            (whole-file state) or the set of binding keys asked for among ``dropped_keys`` (the keys blanked
            statements bind), to keep and walk again.

    Returns:
        A :class:`~torchport.migrate.finding.FileResult`; never raises for bad input.
    """
    result = FileResult(path=path, lines=line_count(source))
    if ruleset.prefilter is None or ruleset.prefilter.search(source) is None:
        return result
    result.analysed = True
    try:
        module = cst.parse_module(source if sliced is None else sliced)
    except cst.ParserSyntaxError as exc:
        if sliced is not None:
            return None  # type: ignore[return-value]
        result.error = FileError(path=path, message=f"not valid Python: {exc.message}", line=_error_line(source, exc))
        return result
    except Exception as exc:  # LibCST raises a few other types on exotic input
        if sliced is not None:
            return None  # type: ignore[return-value]
        result.error = FileError(path=path, message=f"could not parse: {type(exc).__name__}: {exc}")
        return result
    if sliced is None:
        ctx = FileContext(module, ruleset, emit=emit, text=source)
    else:
        from torchport.migrate.sliced import SlicedContext

        ctx = SlicedContext(module, ruleset, emit=emit, text=source, dropped_keys=dropped_keys)
    _Scanner(ctx).walk(module)
    for later in ctx.deferred:  # checks that need every binding in the file (integer device indices)
        later()
    if ctx.reported:
        from torchport.migrate.handled import judge

        judge(ctx, module, sliced_pass=sliced is not None)  # per-backend chains, logged values, guards of CUDA-only kernels
    if sliced is not None and (ctx.whole_file_used or ctx.needed_keys):
        return None if ctx.whole_file_used else ctx.needed_keys  # type: ignore[return-value]
    raws = [r for r in ctx.reported if r.rule.code in ruleset.enabled]
    judge = "TP801" in ruleset.enabled and "noqa" in source.lower()   # every finding counts, reported or not
    pos = positions(module, (r.node for r in (ctx.reported if judge else raws))) if (raws or judge) else {}
    stale = unused_noqa(source, path, ruleset, ctx.reported, pos) if judge else []
    if stale and fix:   # drop the unused codes first (a text edit inside comments: no position moves)
        from torchport.migrate import noqa

        edited = noqa.strip(source, [(c, bad) for c, bad, _ in stale])
        again = analyze(edited, path, ruleset, fix=True, unsafe=unsafe, positions_after_fix=positions_after_fix,
                        emit=emit)
        if again.error is None:
            again.source, again.fixed_source = source, again.fixed_source or edited
            again.findings = [dataclasses.replace(f, fixed=True) for _, _, f in stale] + again.findings
            return again
    if not raws:
        result.findings = [f for _, _, f in stale]
        return result
    if "noqa" in source:
        lines = source.splitlines()
        raws = [r for r in raws if not _noqa(lines, pos[r.node][0], r.rule.code)]
    raws.sort(key=lambda r: pos[r.node])

    applied: set[cst.CSTNode] = set()
    if fix:
        allowed = ("safe", "unsafe") if unsafe else ("safe",)
        wanted = {r.node: r.fix for r in raws if r.fix is not None and r.safety in allowed}
        if wanted:
            applied, fixed_source, error = _apply(module, ctx, wanted)
            if error is not None:
                result.error = FileError(path=path, message=error)
                applied = set()
            elif fixed_source != source:
                result.source, result.fixed_source = source, fixed_source
    findings = [_finding(path, r, pos[r.node], fixed=r.node in applied, torch_only=ctx.emit_torch) for r in raws]
    if stale:
        findings = sorted(findings + [f for _, _, f in stale], key=lambda f: (f.line, f.column))
    if applied and positions_after_fix and result.fixed_source is not None:
        after = analyze(result.fixed_source, path, ruleset, emit=emit)
        findings = [f for f in findings if f.fixed] + after.findings
    result.findings = findings
    return result


def _finding(path: str, raw: Reported, pos: tuple[int, int, int, int], *, fixed: bool,
             torch_only: bool = False) -> Finding:
    rule = raw.rule
    text = message(raw.message) if torch_only else raw.message   # --emit torch: recommend what the fix writes
    return Finding(path=path, line=pos[0], column=pos[1], end_line=pos[2], end_column=pos[3], code=rule.code,
                   name=rule.name, message=text, severity=rule.severity, fix_safety=raw.safety, fixed=fixed)


def _apply(module: cst.Module, ctx: FileContext, wanted: dict[cst.CSTNode, Fix]):
    """Run the fixes; returns (applied nodes, new source, error message or None)."""
    fixer = _Fixer(wanted)
    new = module.visit(fixer)
    if fixer.failed:  # a rule bug: keep the user's file as it is and say which fix broke
        detail = "; ".join(sorted(set(fixer.failed.values())))[:300]
        return set(), module.code, f"internal error in a fix ({detail}); file left unchanged"
    if not fixer.applied:
        return set(), module.code, None
    if ctx.emit_torch and "torchport" in ctx.needs:   # --emit torch: torch core where torch has the API
        new, uses_torchport = lower(new, ctx.torch, ctx.imports.module_alias("torch.distributed"))
        if not uses_torchport:
            ctx.needs.discard("torchport")
    imported = set(ctx.imports.top_level)
    if imported:  # an import whose every use a fix replaced goes too (e.g. `from torch.cuda.amp import autocast`)
        before = count_names(module, imported)
        after = count_names(new, imported)
        new = drop_unused(new, {n for n in imported if before[n] > 0 and after[n] == 0})
    new = add_imports(new, ctx.needs)
    code = new.code
    problem = _unparsable(code, module.code)
    if problem is not None:  # pragma: no cover - a rule bug; the file is left alone
        return set(), module.code, f"internal error: the rewrite did not parse ({problem}); file left unchanged"
    return fixer.applied, code, None


def _unparsable(code: str, original: str) -> str | None:
    """Why ``code`` does not parse as Python (this interpreter's grammar when the original does), or None."""
    try:
        ast.parse(code)
        return None
    except SyntaxError as exc:
        try:
            ast.parse(original)
        except SyntaxError:  # newer syntax than this interpreter: fall back to LibCST's grammar
            try:
                cst.parse_module(code)
                return None
            except Exception as exc2:
                return str(exc2)
        return f"{exc.msg} at line {exc.lineno}"
