"""What a scanner rule is: a class that declares its code, its docs and what it listens to.

The engine walks each file once and calls a rule only for the events it declared:

* ``names`` / ``name_prefixes``: qualified names (after import-alias resolution). A call
  to one goes to :meth:`Rule.on_call`, any other use to :meth:`Rule.on_reference`.
  The most specific declaration wins (exact name, then the longest prefix), so the
  ``torch.cuda.`` catch-all only sees what no other rule claims.
* ``methods``: method names called on a receiver that is *not* an import
  (``x.cuda()``, ``loader.pin_memory()``) -> :meth:`Rule.on_method`.
* ``attributes``: attribute reads on such receivers (``x.is_cuda``) -> :meth:`Rule.on_attribute`.
* ``values``: device-like string literals (``"cuda"``, ``"cuda:1"``, ``f"cuda:{i}"``,
  ``"nccl"``) in value positions (assignment, argument, default, comparison, return,
  conditional, dict value) -> :meth:`Rule.on_value`.
* ``strings``: exact string values anywhere except log/print arguments -> :meth:`Rule.on_string`.
* ``if_exps``: conditional expressions -> :meth:`Rule.on_if_exp`.
* ``imports``: ``import x`` / ``from x... import`` statements of these top-level modules -> :meth:`Rule.on_import`.
* ``assignments``: ``<qualified name> = value`` statements -> :meth:`Rule.on_assign`.

Checks that need the whole file (is this name an integer device index?) run after the
walk: a hook calls ``ctx.defer(fn)`` and ``fn`` asks ``ctx.int_device(expr)``.

A rule reports through the file context (``ctx.report``) and may attach a fix: a
function from the *updated* node (children already rewritten) to its replacement, so
fixes on nested constructs compose. Rules hold no per-file state.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import TYPE_CHECKING, Any, ClassVar

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.records import DeviceString, Site

if TYPE_CHECKING:  # pragma: no cover - the one edge toward the context is for type checkers only
    from torchport.migrate.context import FileContext

__all__ = ["Rule", "Site", "DeviceString", "CODE_RANGES", "KEBAB", "OUTCOMES", "keyword", "positional",
           "call_args_plain", "is_true", "with_args", "compat_served", "compat_call", "compat_reference",
           "compat_reference_fix", "COMPAT_NOTE"]

#: Code ranges: first digit -> category (documented in docs/rules/README.md).
CODE_RANGES: dict[str, str] = {
    "1": "device placement and the device API",
    "2": "automatic mixed precision",
    "3": "distributed training",
    "4": "data loading",
    "5": "checkpoints and serialization",
    "6": "single-backend dialects (Ascend NPU, Intel XPU, Apple MPS) back to portable",
    "8": "torchport's own comments (noqa)",
    "9": "noisy rules (off by default)",
}
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
#: the outcome classes of :attr:`Rule.after_fix` (each part of it starts with one)
OUTCOMES = ("fixed", "redirected to runtime", "reported only")
_CODE = re.compile(r"^TP[1-9][0-9]{2}$")



def calls_only(call: Any, qualname: str | None, bound: Any) -> bool:
    """A ``fast_call_gate`` for a rule whose ``names`` act only through :meth:`Rule.on_call`: every call passes,
    references do not mark (``device: Optional[torch.device] = None``, ``isinstance(d, torch.device)``)."""
    return True

class Rule:
    """Base class: subclasses set the ClassVars and override the hooks they declared.

    Docs fields (rendered into ``docs/rules/<CODE>.md`` and ``torchport explain``):
    ``summary`` (what it does), ``why`` (why it matters), ``example`` (code that
    triggers it), ``use_instead`` (the device-agnostic form; for fixable rules, what
    the fix turns ``example`` into), ``fix_notes`` (fix safety explained), ``after_fix``
    (what a fixed file does where the rule fired, compared with ``torchport run``: one or more
    of :data:`OUTCOMES` joined by ``"; "`` -- *fixed*, *redirected to runtime: ...*, *reported
    only -- harmless because ...*; the per-rule contract, ``tools/rule_contract.py``, checks it).
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = "warning"
    fix: ClassVar[str] = "none"
    default_enabled: ClassVar[bool] = True
    summary: ClassVar[str] = ""
    why: ClassVar[str] = ""
    example: ClassVar[str] = ""
    use_instead: ClassVar[str] = ""
    fix_notes: ClassVar[str] = ""
    after_fix: ClassVar[str] = ""
    #: text that must occur in a file for this rule to possibly fire (the prefilter): every file the rule can
    #: report in holds one of ``needles`` or matches one of ``needle_patterns`` (regular expressions).
    #: tests/migrate/test_fast_engine.py checks it over every fixture and a corpus (prefilter off vs on).
    needles: ClassVar[tuple[str, ...]] = ("cuda",)
    needle_patterns: ClassVar[tuple[str, ...]] = ()

    names: ClassVar[tuple[str, ...]] = ()
    name_prefixes: ClassVar[tuple[str, ...]] = ()
    methods: ClassVar[tuple[str, ...]] = ()
    attributes: ClassVar[tuple[str, ...]] = ()
    values: ClassVar[bool] = False
    strings: ClassVar[tuple[str, ...]] = ()
    if_exps: ClassVar[bool] = False
    #: top-level module names whose ``import`` statements go to :meth:`on_import`
    imports: ClassVar[tuple[str, ...]] = ()
    #: the dotted modules (and those below them) among ``imports`` whose import :meth:`on_import` can report;
    #: empty: all of ``imports``. The fast scan sends a file to LibCST for an import only when it names one.
    import_modules: ClassVar[tuple[str, ...]] = ()
    #: qualified names one of which an ``IfExp`` must reference for :meth:`on_if_exp` to act (empty: any IfExp).
    #: The fast scan then marks those references (when the rule set dispatches them) instead of every IfExp.
    if_exp_names: ClassVar[tuple[str, ...]] = ()
    #: qualified names whose assignment (``torch.backends.cudnn.benchmark = True``) goes to :meth:`on_assign`
    assignments: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return
        if not _CODE.match(code) or code[2] not in CODE_RANGES:
            raise ValueError(f"rule {cls.__name__}: code {code!r} is not TP<digit><2 digits> in a documented range "
                             f"({', '.join(f'TP{k}xx' for k in CODE_RANGES)})")
        if not KEBAB.match(cls.name):
            raise ValueError(f"rule {code}: name {cls.name!r} is not kebab-case (e.g. 'cuda-method')")
        if cls.severity not in ("error", "warning", "info") or cls.fix not in ("safe", "unsafe", "none"):
            raise ValueError(f"rule {code}: severity must be error/warning/info and fix safe/unsafe/none")
        if (code[2] == "9") == cls.default_enabled:
            raise ValueError(f"rule {code}: TP9xx rules (and only they) are off by default")

    #: for the fast scan (:mod:`torchport.migrate.fast`), a rule whose ``names`` and ``methods`` act only through
    #: calls (it keeps :meth:`on_reference` a no-op) may define ``fast_call_gate(call, qualname, bound)``: False
    #: when :meth:`on_call` / :meth:`on_method` cannot act on this ``ast.Call`` (``qualname`` None: a method call;
    #: ``bound``: the binding keys of the file). None: every call may reach the rule.
    fast_call_gate: ClassVar[Any] = None
    #: the ``names`` the gate decides for (None: all of them and the ``methods``); the rule's other names mark
    #: every use, as an ungated rule's do
    fast_gated_names: ClassVar[tuple[str, ...] | None] = None

    # -- hooks ----------------------------------------------------------------------------
    def on_call(self, ctx: "FileContext", node: cst.Call, qualname: str) -> None:
        """A call to one of ``names``: by default the same as a reference."""
        self.on_reference(ctx, node.func, qualname)

    def on_reference(self, ctx: "FileContext", node: cst.BaseExpression, qualname: str) -> None:
        """A non-call use of one of ``names`` (default: nothing; CUDA-only names override this)."""

    def on_method(self, ctx: "FileContext", node: cst.Call, name: str) -> None:
        """``receiver.<name>(...)`` on a receiver that is not an import."""

    def on_attribute(self, ctx: "FileContext", node: cst.Attribute) -> None:
        """``receiver.<attribute>`` read on a receiver that is not an import."""

    def on_value(self, ctx: "FileContext", node: cst.BaseExpression, value: DeviceString, site: Site) -> None:
        """A device-like string in a value position."""

    def on_string(self, ctx: "FileContext", node: cst.SimpleString, value: str) -> None:
        """An exact string from ``strings`` (outside log/print arguments)."""

    def on_if_exp(self, ctx: "FileContext", node: cst.IfExp) -> None:
        """A conditional expression ``a if cond else b``."""

    def on_import(self, ctx: "FileContext", node: "cst.Import | cst.ImportFrom", module: str | None) -> None:
        """An import statement of one of ``imports`` (``module``: the dotted module imported)."""

    def on_assign(self, ctx: "FileContext", node: cst.Assign, qualname: str) -> None:
        """``<qualname> = value`` for one of ``assignments``."""

    def __repr__(self) -> str:
        return f"<rule {self.code} {self.name}>"


# -- small helpers for rules ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def comma() -> cst.Comma:
    """``, `` as the fixes write it (``a, b``); built on first use (LibCST is imported lazily)."""
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


@functools.lru_cache(maxsize=None)
def eq() -> cst.AssignEqual:
    """``=`` of a keyword argument as the fixes write it (``k=v``)."""
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def compat_served(name: str) -> bool:
    """True when ``torchport.compat.<name>`` exists: ``torch.cuda.<name>`` as ``torchport run`` answers it (the
    shim's implementation), ``DataParallel`` or ``restore_location`` (see :mod:`torchport.shim.compat`; reading
    its name list imports no torch)."""
    from torchport.shim.compat import served

    return served(name)


#: appended to a message when ``--emit torch`` output keeps a runtime call because torch has no equivalent
COMPAT_NOTE = " (--emit torch: torch has no equivalent that runs everywhere; this call stays on torchport.compat)"


def compat_call(ctx, name: str, call: cst.Call) -> cst.Call:
    """``call`` with its callee replaced by ``torchport.compat.<name>`` (arguments kept)."""
    return call.with_changes(func=ctx.expr(f"{ctx.tp}.compat.{name}"))


#: served names that are classes (a reference to them -- an annotation, ``isinstance`` -- stays as written)
_LOWERCASE_CLASSES = ("device", "device_of", "graph")


def compat_reference(qualname: str) -> tuple[str, str] | None:
    """``(compat path, rest)`` when a reference to ``qualname`` -- a served function or value, or an attribute of
    one (``torch.backends.cuda.cufft_plan_cache.max_size``) -- can point at ``torchport.compat`` (a decorator
    such as ``@torch.cuda.amp.custom_bwd``, ``torch.cuda.default_generators[0]``, ``f = torch.cuda.utilization``);
    None for everything else, classes included. Torch-free (the CUDA-surface registry's names)."""
    from torchport.shim import surface

    served = surface.served()
    parts = qualname.split(".")
    for end in range(len(parts), 2, -1):
        head = ".".join(parts[:end])
        if head in served:
            short = parts[end - 1]
            if short[:1].isupper() or short in _LOWERCASE_CLASSES:
                return None
            rest = "".join(f".{p}" for p in parts[end:])
            return surface.compat_path(head), rest
    return None


def compat_reference_fix(ctx, path: str, rest: str) -> Any:
    """The fix of :func:`compat_reference`: the dotted reference replaced by ``torchport.compat.<path><rest>``."""
    return lambda n: ctx.expr(f"{ctx.tp}.compat.{path}{rest}")


def tune_statement(ctx, knob: str, value: cst.BaseExpression) -> cst.Expr:
    """``torchport.tune(<knob>=<value>)`` as a statement."""
    call = cst.Call(func=ctx.expr(f"{ctx.tp}.tune"), args=[cst.Arg(value, keyword=cst.Name(knob), equal=eq())])
    return cst.Expr(call)


def report_tune_assign(rule: "Rule", ctx, node: cst.Assign, knob: str, message: str) -> None:
    """Report an assignment to a backend knob, fixed to ``torchport.tune(<knob>=<value>)``."""
    ctx.claim(node.targets[0].target)
    ctx.report(rule, node, message, fix=lambda n: tune_statement(ctx, knob, n.value))


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    """The ``name=`` argument of ``call``, or None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call, index: int) -> cst.Arg | None:
    """The ``index``-th positional argument (stops at the first ``*args``), or None."""
    i = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            return None
        if i == index:
            return arg
        i += 1
    return None


def call_args_plain(call: cst.Call) -> bool:
    """True when the call has no ``*args`` / ``**kwargs`` (so its arguments can be rewritten)."""
    return not any(arg.star for arg in call.args)


def is_true(expr: cst.BaseExpression) -> bool:
    """True for the literal ``True``."""
    return isinstance(expr, cst.Name) and expr.value == "True"


def with_args(call: cst.Call, args: list[cst.Arg]) -> cst.Call:
    """``call`` with ``args``, commas normalised (``a, b`` with no trailing comma)."""
    fixed = []
    for i, arg in enumerate(args):
        last = i == len(args) - 1
        comma = arg.comma
        if last:
            if isinstance(comma, cst.Comma) and comma.whitespace_after.__class__ is cst.ParenthesizedWhitespace:
                fixed.append(arg)  # a trailing comma before a newline: keep the layout
                continue
            comma = cst.MaybeSentinel.DEFAULT
        elif not isinstance(comma, cst.Comma):
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        fixed.append(arg.with_changes(comma=comma))
    return call.with_changes(args=fixed)
