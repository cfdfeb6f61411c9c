"""The dispatch tables of a rule selection, readable without LibCST.

:class:`RuleSet` compiles the selected rules' declarations (names, methods, strings ...) into dictionaries the
engine's walk looks up in O(1), the text prefilter (:class:`Prefilter`) and what the fast scan's ``ast`` marks
read (:mod:`torchport.migrate.fast`); the per-file state rules report into is
:class:`~torchport.migrate.context.FileContext`, which needs LibCST.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

#: a :class:`torchport.migrate.rules.base.Rule` (not imported: this module needs no more of a rule than its
#: declarations, read by attribute)
Rule = Any

__all__ = ["RuleSet", "Prefilter", "DEVICE_TEXT", "DEVICE_INDEX_NAMES", "DEVICE_INDEX_LISTS"]

#: a string :meth:`FileContext.device_string` can read as a device or collective (``"cuda"``, ``"npu:1"``, the
#: ``"cuda:"`` of ``f"cuda:{i}"``, ``"xpu:%d"``, ``"NCCL"``): looser than it, for the fast scan's marks
DEVICE_TEXT = re.compile(r"(?i)(?:cuda|npu|xpu|mps|nccl|hccl|xccl)(?::|$)")
#: names that hold an integer device index when bound to an int (or taken as a parameter)
DEVICE_INDEX_NAMES = frozenset({"rank", "local_rank", "gpu", "gpu_id", "gpu_idx", "device_id", "device_idx",
                                "gpu_index", "device_index", "local_gpu", "ddp_local_rank", "ddp_rank"})
#: names of lists of device indices (``device_ids[0]`` is an index)
DEVICE_INDEX_LISTS = frozenset({"device_ids", "gpu_ids", "gpu_list", "device_list"})


_META = frozenset(".^$*+?{}[]|()")


def _literal_head(pattern: str) -> str:
    """The literal text every match of ``pattern`` starts with (``\\.to\\(\\s*\\d`` -> ``.to(``), or "" when it
    has an alternation or starts with no plain character. A quantified last character is left out."""
    if "|" in pattern:      # an alternation (or an escaped bar: not worth telling apart)
        return ""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if not nxt or nxt.isalnum():      # \s, \d, \b ...: a class or an assertion, not a literal
                break
            out.append(nxt)
            i += 2
            continue
        if c in _META:
            if c in "*+?{" and out:          # the last literal is optional or repeated
                out.pop()
            break
        out.append(c)
        i += 1
    return "".join(out)


class Prefilter:
    """The text prefilter: ``search(text)`` is not None when ``text`` holds one of ``needles`` or matches one of
    ``patterns``. The literal needles are looked up with ``in`` (one C-level scan each): a regular expression
    alternating ~50 literals costs several times more per file; a pattern is tried only where its literal head
    occurs (:func:`_literal_head`)."""

    #: substrings shared by several needles: when ``text`` lacks one, the needles holding it are not looked up
    HUBS = ("npu", "xpu", "mps", "device_", "ccl")

    def __init__(self, needles: Sequence[str], patterns: Sequence[str]) -> None:
        # the usual hits first: a file that has one stops at the first lookup
        self.needles = tuple(sorted(needles, key=lambda n: (n != "cuda", n)))
        #: (literal every match starts with, or "" when none is known, compiled pattern)
        self.patterns = tuple((_literal_head(p), re.compile(p)) for p in patterns)
        groups: dict[str, list[str]] = {}
        for n in self.needles:   # (hub, needles holding it); a needle holding no hub is its own group
            groups.setdefault(next((h for h in self.HUBS if h in n), n), []).append(n)
        self.groups = tuple((hub, tuple(ns)) for hub, ns in groups.items())

    def search(self, text: str) -> str | re.Match[str] | None:
        for hub, needles in self.groups:
            if hub in text:
                for n in needles:
                    if n in text:
                        return n
        for head, pattern in self.patterns:
            if not head:
                m = pattern.search(text)
                if m is not None:
                    return m
                continue
            # a regular expression scans every position; the literal head is found at C speed (5x cheaper)
            i = text.find(head)
            while i != -1:
                m = pattern.match(text, i)
                if m is not None:
                    return m
                i = text.find(head, i + 1)
        return None


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
        self.imports: dict[str, list[Rule]] = {}
        self.assignments: dict[str, list[Rule]] = {}
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
            for m in rule.imports:
                self.imports.setdefault(m, []).append(rule)
            for a in rule.assignments:
                self.assignments.setdefault(a, []).append(rule)
        self.prefixes = sorted(prefixes.items(), key=lambda kv: -len(kv[0]))
        #: for the fast scan: the rules that act on ``names`` / ``methods`` only through calls a gate admits
        self.gated = frozenset(r for r in self.rules if getattr(r, "fast_call_gate", None) is not None)
        #: for the fast scan: whether any IfExp may reach a rule (else the names ``if_exp_names`` declares mark it)
        self.if_exp_marks = any(not r.if_exp_names or not all(self.lookup(n) for n in r.if_exp_names)
                                for r in self.if_exps)
        #: for the fast scan: the dotted modules whose import statement may reach a rule (and those below them)
        self.import_modules = tuple(sorted({m for top, rules in self.imports.items() for r in rules
                                            for m in (r.import_modules or (top,)) if m.split(".", 1)[0] == top}))
        needles = {n for r in self.rules if r.code in self.enabled for n in r.needles}
        needles = sorted(n for n in needles if not any(m != n and m in n for m in needles))  # "cuda" covers "is_cuda"
        patterns = sorted({p for r in self.rules if r.code in self.enabled for p in r.needle_patterns})
        self.prefilter = Prefilter(needles, patterns) if needles or patterns else None

    def gated_for(self, rule: Rule, qualname: str | None) -> bool:
        """For the fast scan: whether ``rule``'s ``fast_call_gate`` decides on a use of ``qualname`` (None: a method
        call) -- a rule with ``fast_gated_names`` gates only those names; its other names and methods mark as any
        rule's do."""
        if rule not in self.gated:
            return False
        names = getattr(rule, "fast_gated_names", None)
        return names is None or qualname in names

    def lookup(self, qualname: str) -> Sequence[Rule]:
        """Rules for a qualified name: exact match first, then the longest prefix."""
        hit = self.names.get(qualname)
        if hit is not None:
            return hit
        for prefix, rules in self.prefixes:
            if qualname.startswith(prefix):
                return rules
        return ()
