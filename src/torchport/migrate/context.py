"""Per-file state the rules report into (the dispatch tables of a rule selection, :class:`RuleSet`, live in
:mod:`torchport.migrate.ruleset`, which needs no LibCST).

:class:`FileContext` is what a rule sees: ``report`` / ``claim``, name resolution, device-string recognition, and the
builders its fixes use (``ctx.tp``, ``ctx.torch``, ``ctx.device_expr()`` ...), which
add ``import torchport`` / ``import torch`` only when a fix actually uses them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable

import libcst as cst

from torchport.migrate.records import DeviceString
from torchport.migrate.ruleset import DEVICE_INDEX_LISTS, DEVICE_INDEX_NAMES, RuleSet
from torchport.migrate.resolve import ImportTable, qualname
from torchport.migrate.walk import FastVisitor

#: a :class:`torchport.migrate.rules.base.Rule` (not imported: the rules import this module's types, and this
#: module needs no more of a rule than its declarations, read by attribute)
Rule = Any

__all__ = ["RuleSet", "FileContext", "Fix", "Reported"]

Fix = Callable[[cst.CSTNode], cst.CSTNode]

_DEVICE = re.compile(r"^(cuda|npu|xpu|mps)(?::(\d+))?$")
_COLLECTIVES = frozenset({"nccl", "hccl", "xccl"})
_DEVICE_WORDS = ("cuda", "nccl", "npu", "xpu", "mps", "hccl", "xccl", "NCCL", "HCCL")
_IMPORTS_TORCHPORT = re.compile(r"^\s*(import|from)\s+torchport\b", re.M)
#: markers of a multi-process script: there ``"cuda:0"`` and ``torchport.device()`` may differ
_DISTRIBUTED_MARKERS = re.compile(r"init_process_group|LOCAL_RANK|DistributedDataParallel|\bspawn\(|local_rank")


@functools.lru_cache(maxsize=512)
def _parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


#: bound by ``for i in range(torch.cuda.device_count())``: an integer device index
LOOP_INDEX = cst.Name("__device_index__")


def _binding_key(expr: cst.BaseExpression) -> str | None:
    """``"x"`` for a name, ``"self.x"`` / ``"args.x"`` for an attribute of a name, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return f"{expr.value.value}.{expr.attr.value}"
    return None


@dataclasses.dataclass
class Reported:
    """One finding as a rule reported it: the node, the message, the fix and its safety."""

    rule: Rule
    node: cst.CSTNode
    message: str
    fix: Fix | None
    safety: str


class FileContext:
    """Per-file state the rules report into, and builders their fixes use.

    Attributes:
        imports: the file's :class:`~torchport.migrate.resolve.ImportTable`.
        needs: modules a fix referenced that the file does not import yet.
    """

    def __init__(self, module: cst.Module, ruleset: RuleSet, *, emit: str = "torchport",
                 text: str | None = None) -> None:
        self.module = module
        self._text = text
        self.ruleset = ruleset
        self.emit = emit
        self.imports = ImportTable.from_module(module)
        self.aliases = self.imports.aliases
        self.shadowed: frozenset[str] = frozenset()
        self.reported: list[Reported] = []
        self.claimed: set[cst.CSTNode] = set()
        self.needs: set[str] = set()
        self.fstring_quotes: list[str] = []
        self.bindings: dict[str, list[cst.BaseExpression | None]] = {}
        self.params: set[str] = set()
        self.deferred: list[Callable[[], None]] = []
        #: uses of each import-bound name in the code (imports themselves not counted)
        self.alias_uses: dict[str, int] = {}
        #: per-file results a rule computes once for the whole file (keyed by rule code)
        self.memo: dict[str, object] = {}

    @functools.cached_property
    def text(self) -> str:
        """The file's source text (the engine passes it; else generated from the module, which costs a pass)."""
        return self._text if self._text is not None else self.module.code

    @functools.cached_property
    def emit_torch(self) -> bool:
        """True when the fixes are lowered to torch core (:mod:`torchport.migrate.emit`): ``--emit torch``,
        or a file already written against ``torch.accelerator``; never in a file that imports torchport.
        The file's own style wins, so fixing ``--emit torch`` output with either choice changes nothing."""
        if _IMPORTS_TORCHPORT.search(self.text) is not None:
            return False
        return self.emit == "torch" or re.search(r"\btorch\.accelerator\.", self.text) is not None

    @property
    def quote(self) -> str:
        """A quote character a fix may use at the current position (the other one inside an f-string)."""
        return "'" if self.fstring_quotes and '"' in self.fstring_quotes[-1] else '"'

    # -- reporting ------------------------------------------------------------------------
    def report(self, rule: Rule, node: cst.CSTNode, message: str, *, fix: Fix | None = None,
               safety: str | None = None) -> None:
        """Record a finding at ``node`` (which becomes claimed) with an optional fix.

        ``safety`` defaults to the rule's declared fix safety; it is ``"none"`` without a fix.
        """
        if fix is None:
            safety = "none"
        elif safety is None:
            safety = rule.fix
        self.claimed.add(node)
        self.reported.append(Reported(rule, node, message, fix, safety))

    def claim(self, *nodes: cst.CSTNode) -> None:
        """Keep other rules (and the walk) out of these nodes' subtrees."""
        self.claimed.update(nodes)

    def is_claimed(self, node: cst.CSTNode) -> bool:
        """True when some rule already reported or claimed ``node``."""
        return node in self.claimed

    # -- resolution -----------------------------------------------------------------------
    def qualname(self, expr: cst.BaseExpression) -> str | None:
        """The dotted path ``expr`` names through the imports, or None."""
        return qualname(expr, self.aliases, self.shadowed)

    def is_call_to(self, expr: cst.BaseExpression, *names: str) -> bool:
        """True when ``expr`` is a call whose callee resolves to one of ``names``."""
        return isinstance(expr, cst.Call) and self.qualname(expr.func) in names

    @staticmethod
    def device_string(expr: cst.BaseExpression) -> DeviceString | None:
        """A device or collective string as a record, else None.

        Recognised: ``"cuda"``, ``"cuda:N"``, ``f"cuda:{i}"``, ``"cuda:%d" % i``, ``"cuda:{}".format(i)`` (also for
        ``npu`` / ``xpu`` / ``mps``), and ``"nccl"`` / ``"hccl"`` / ``"xccl"``.
        """
        if isinstance(expr, cst.SimpleString):
            raw = expr.value
            if not any(w in raw for w in _DEVICE_WORDS) or "b" in expr.prefix.lower():
                return None
            try:
                val = expr.evaluated_value
            except Exception:  # pragma: no cover - odd literals
                return None
            if val in _COLLECTIVES:
                return DeviceString(val, val)
            if isinstance(val, str) and val.isupper() and val.lower() in _COLLECTIVES:  # torch lower-cases "NCCL"
                return DeviceString(val, val.lower())
            m = _DEVICE.match(val) if isinstance(val, str) else None
            if m is None:
                return None
            return DeviceString(val, m.group(1), int(m.group(2)) if m.group(2) is not None else None)
        if isinstance(expr, cst.FormattedString):
            parts = expr.parts
            if len(parts) == 1 and isinstance(parts[0], cst.FormattedStringText):
                m = _DEVICE.match(parts[0].value)
                if m is not None and m.group(2) is None:
                    return DeviceString(m.group(1), m.group(1))
            if (
                len(parts) == 2
                and isinstance(parts[0], cst.FormattedStringText)
                and parts[0].value.endswith(":")
                and parts[0].value[:-1] in ("cuda", "npu", "xpu", "mps")
                and isinstance(parts[1], cst.FormattedStringExpression)
                and parts[1].conversion is None
                and parts[1].format_spec is None
            ):
                return DeviceString(None, parts[0].value[:-1], index_expr=parts[1].expression)
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
                and isinstance(expr.func.value, cst.SimpleString) and len(expr.args) == 1
                and expr.args[0].keyword is None and not expr.args[0].star):
            try:
                val = expr.func.value.evaluated_value
            except Exception:  # pragma: no cover
                return None
            if isinstance(val, str) and val.endswith(":{}") and val[:-3] in ("cuda", "npu", "xpu", "mps"):
                return DeviceString(None, val[:-3], index_expr=expr.args[0].value)
            return None
        if (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo)
                and isinstance(expr.left, cst.SimpleString)
                and not isinstance(expr.right, (cst.Tuple, cst.Dict, cst.SimpleString))):
            try:
                val = expr.left.evaluated_value
            except Exception:  # pragma: no cover
                return None
            if isinstance(val, str) and val.endswith(":%d") and val[:-3] in ("cuda", "npu", "xpu", "mps"):
                return DeviceString(None, val[:-3], index_expr=expr.right)
        return None

    # -- integer device indices (local data flow) -------------------------------------------
    def note_binding(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """Record ``target = value`` (``value`` None: bound to something unknown) for :meth:`int_device`."""
        key = _binding_key(target)
        if key is not None:
            self.bindings.setdefault(key, []).append(value)

    def note_param(self, name: str) -> None:
        """A parameter: an int device index when its name says so (``rank``, ``gpu_id`` ...)."""
        if name in DEVICE_INDEX_NAMES:
            self.params.add(name)

    def defer(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the walk (when every binding in the file is known)."""
        self.deferred.append(fn)

    def int_device(self, expr: cst.BaseExpression, _seen: frozenset[str] = frozenset()) -> str | None:
        """What integer device index ``expr`` holds: ``"local"`` (the local rank, from ``LOCAL_RANK``),
        ``"literal"`` (an int literal), ``"index"`` (another int index: a rank, a loop over the
        device count, ``args.gpu``) or None (not known to be an int device). Call after the walk
        (from a :meth:`defer` callback)."""
        if expr is LOOP_INDEX:
            return "index"
        if isinstance(expr, cst.Integer):
            return "literal"
        if isinstance(expr, cst.Call):
            if self.qualname(expr.func) in ("torch.distributed.get_rank", "torch.distributed.get_local_rank"):
                return "index"
            if isinstance(expr.func, cst.Name) and expr.func.value == "int" and len(expr.args) == 1:
                text = self.module.code_for_node(expr.args[0].value)
                if "LOCAL_RANK" in text:
                    return "local"
                if "RANK" in text:
                    return "index"
                inner = self.int_device(expr.args[0].value, _seen)
                return inner if inner in ("local", "index") else None
            return None
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
            if "device_count" in self.module.code_for_node(expr.right):
                left = self.int_device(expr.left, _seen)
                return "local" if left == "local" else "index"
            return None
        if (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name)
                and expr.value.value in DEVICE_INDEX_LISTS):
            return "index"  # device_ids[0]
        key = _binding_key(expr)
        if key is None:
            return None
        if key in _seen:
            return None
        values = self.bindings.get(key)
        short = key.rsplit(".", 1)[-1]
        if not values:
            if key in self.params:
                return "index"
            if isinstance(expr, cst.Attribute) and not key.startswith("self.") and short in DEVICE_INDEX_NAMES:
                return "index"  # args.gpu, opt.local_rank: command-line integers
            return None
        kinds = set()
        for value in values:
            if value is None:
                return None
            if isinstance(value, cst.Integer):
                if short not in DEVICE_INDEX_NAMES:
                    return None
                kinds.add("index")
                continue
            kind = self.int_device(value, _seen | {key})
            if kind is None:
                return None
            kinds.add(kind)
        if kinds == {"local"}:
            return "local"
        return "index"

    @functools.cached_property
    def dispatch_subjects(self) -> frozenset[str]:
        """Operands the file compares with two or more device types (``device.type == "cuda"`` ...
        ``elif device.type == "npu"``): such code already branches per backend, so its comparisons stay."""
        text = self.text
        if sum(1 for t in ("cuda", "npu", "xpu", "mps") if t in text) < 2:   # no operand can meet two types
            return frozenset()
        seen: dict[str, set[str]] = {}
        device_string, code = self.device_string, self.module.code_for_node

        class _Comparisons(FastVisitor):
            def visit_Comparison(self, node: cst.Comparison) -> None:
                operands = [node.left, *(t.comparator for t in node.comparisons)]
                for i, operand in enumerate(operands):
                    ds = device_string(operand)
                    if ds is None or ds.device_type not in ("cuda", "npu", "xpu", "mps"):
                        continue
                    other = operands[i + 1] if i + 1 < len(operands) else operands[i - 1]
                    seen.setdefault(code(other), set()).add(ds.device_type)

        _Comparisons().walk(self.module)
        return frozenset(subject for subject, types in seen.items() if len(types) >= 2)

    @functools.cached_property
    def cuda_written(self) -> bool:
        """True when the file uses CUDA (``torch.cuda``, ``.cuda()``, ``"cuda"``): a comparison with
        ``"mps"`` / ``"npu"`` there special-cases that backend and must keep meaning it.

        A file that already imports torchport, or uses ``torch.accelerator``, counts too: it is (or reads
        like) the output of a fix of CUDA code (``--emit torchport`` / ``--emit torch``), so fixing it again
        must take the same decision (fix is idempotent)."""
        code = self.text
        return (re.search(r"\bcuda\b|\btorch\.accelerator\.", code) is not None
                or _IMPORTS_TORCHPORT.search(code) is not None)

    @functools.cached_property
    def distributed(self) -> bool:
        """True when the file looks multi-process (``init_process_group``, ``LOCAL_RANK``, DDP, spawn)."""
        return _DISTRIBUTED_MARKERS.search(self.text) is not None

    def index_device_expr(self, index: cst.BaseExpression, kind: str | None) -> cst.BaseExpression:
        """The portable device for an integer index: ``torchport.device()`` for the local rank or a
        literal 0 in a single-process script, else ``torch.device(torchport.current().type, i)``."""
        if kind == "local" or (kind == "literal" and isinstance(index, cst.Integer) and index.evaluated_value == 0
                               and not self.distributed):
            return self.device_expr()
        return cst.Call(func=self.expr(f"{self.torch}.device"),
                        args=[cst.Arg(self.type_expr(), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                              cst.Arg(index)])

    # -- builders for fixes (call these inside fix functions) -------------------------------
    def _alias(self, module: str) -> str:
        alias = self.imports.module_alias(module)
        if alias is None:
            self.needs.add(module)
            return module
        return alias

    @property
    def tp(self) -> str:
        """The local name of the ``torchport`` module (adds ``import torchport`` if missing)."""
        return self._alias("torchport")

    @property
    def torch(self) -> str:
        """The local name of the ``torch`` module (adds ``import torch`` if missing)."""
        return self._alias("torch")

    @staticmethod
    def expr(code: str) -> cst.BaseExpression:
        """Parse an expression (cached; nodes are immutable, so sharing is fine)."""
        return _parse_expr(code)

    def device_expr(self) -> cst.BaseExpression:
        """``torchport.device()``."""
        return self.expr(f"{self.tp}.device()")

    def type_expr(self) -> cst.BaseExpression:
        """``torchport.current().type`` (the selected device type, a str)."""
        return self.expr(f"{self.tp}.current().type")
