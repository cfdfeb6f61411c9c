"""Per-file state the rules report into, and the dispatch tables of a rule selection.

:class:`RuleSet` compiles the selected rules' declarations (names, methods, strings ...)
into dictionaries the engine's walk looks up in O(1); :class:`FileContext` is what a
rule sees: ``report`` / ``claim``, name resolution, device-string recognition, and the
builders its fixes use (``ctx.tp``, ``ctx.torch``, ``ctx.device_expr()`` ...), which
add ``import torchport`` / ``import torch`` only when a fix actually uses them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable, Iterable, Sequence

import libcst as cst

from torchport.migrate.resolve import ImportTable, qualname
from torchport.migrate.rules.base import DeviceString, Rule

__all__ = ["RuleSet", "FileContext", "Fix", "Reported"]

Fix = Callable[[cst.CSTNode], cst.CSTNode]

_DEVICE = re.compile(r"^cuda(?::(\d+))?$")


@functools.lru_cache(maxsize=512)
def _parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


class RuleSet:
    """Dispatch tables over the rules that run, plus which codes are reported.

    Args:
        rules: rule instances that run (all default rules run even when not reported,
            so that their claims keep more general rules quiet).
        enabled: codes whose findings are reported.
    """

    def __init__(self, rules: Sequence[Rule], enabled: Iterable[str]) -> None:
        self.rules = tuple(rules)
        self.enabled = frozenset(enabled)
        self.names: dict[str, list[Rule]] = {}
        prefixes: dict[str, list[Rule]] = {}
        self.methods: dict[str, list[Rule]] = {}
        self.attributes: dict[str, list[Rule]] = {}
        self.strings: dict[str, list[Rule]] = {}
        self.values: list[Rule] = []
        self.if_exps: list[Rule] = []
        for rule in self.rules:
            for n in rule.names:
                self.names.setdefault(n, []).append(rule)
            for p in rule.name_prefixes:
                prefixes.setdefault(p, []).append(rule)
            for m in rule.methods:
                self.methods.setdefault(m, []).append(rule)
            for a in rule.attributes:
                self.attributes.setdefault(a, []).append(rule)
            for s in rule.strings:
                self.strings.setdefault(s, []).append(rule)
            if rule.values:
                self.values.append(rule)
            if rule.if_exps:
                self.if_exps.append(rule)
        self.prefixes = sorted(prefixes.items(), key=lambda kv: -len(kv[0]))
        needles = sorted({n for r in self.rules if r.code in self.enabled for n in r.needles})
        self.prefilter = re.compile("|".join(map(re.escape, needles))) if needles else None

    def lookup(self, qualname: str) -> Sequence[Rule]:
        """Rules for a qualified name: exact match first, then the longest prefix."""
        hit = self.names.get(qualname)
        if hit is not None:
            return hit
        for prefix, rules in self.prefixes:
            if qualname.startswith(prefix):
                return rules
        return ()


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

    def __init__(self, module: cst.Module, ruleset: RuleSet) -> None:
        self.module = module
        self.ruleset = ruleset
        self.imports = ImportTable.from_module(module)
        self.aliases = self.imports.aliases
        self.shadowed: frozenset[str] = frozenset()
        self.reported: list[Reported] = []
        self.claimed: set[cst.CSTNode] = set()
        self.needs: set[str] = set()
        self.fstring_quotes: list[str] = []

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
        """``"cuda"``, ``"cuda:N"``, ``f"cuda:{i}"`` or ``"nccl"`` as a record, else None."""
        if isinstance(expr, cst.SimpleString):
            raw = expr.value
            if ("cuda" not in raw and "nccl" not in raw) or "b" in expr.prefix.lower():
                return None
            try:
                val = expr.evaluated_value
            except Exception:  # pragma: no cover - odd literals
                return None
            if val == "nccl":
                return DeviceString("nccl", "nccl")
            m = _DEVICE.match(val) if isinstance(val, str) else None
            if m is None:
                return None
            return DeviceString(val, "cuda", int(m.group(1)) if m.group(1) is not None else None)
        if isinstance(expr, cst.FormattedString):
            parts = expr.parts
            if len(parts) == 1 and isinstance(parts[0], cst.FormattedStringText) and parts[0].value == "cuda":
                return DeviceString("cuda", "cuda")
            if (
                len(parts) == 2
                and isinstance(parts[0], cst.FormattedStringText)
                and parts[0].value == "cuda:"
                and isinstance(parts[1], cst.FormattedStringExpression)
                and parts[1].conversion is None
                and parts[1].format_spec is None
            ):
                return DeviceString(None, "cuda", index_expr=parts[1].expression)
        return None

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
