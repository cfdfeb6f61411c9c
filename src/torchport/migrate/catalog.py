"""The rule catalog: lookup by code or name, selection by code prefix.

Example::

    from torchport.migrate import catalog
    catalog.get("TP101").name                          # 'cuda-method'
    [r.code for r in catalog.select(["TP2"], ["TP210"])]   # the AMP rules but apex
"""

from __future__ import annotations

import difflib
import functools
from typing import Iterable, Sequence

from torchport.migrate.rules import ALL_RULES
from torchport.migrate.rules.base import CODE_RANGES, Rule

__all__ = ["rules", "get", "select", "UnknownRuleError", "CODE_RANGES", "ruleset"]


class UnknownRuleError(ValueError):
    """A ``--select`` / ``--ignore`` / ``explain`` argument matches no rule; the message lists close ones."""


@functools.lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """One instance of every rule, in code order."""
    insts = tuple(cls() for cls in ALL_RULES)
    return tuple(sorted(insts, key=lambda r: r.code))


def get(code_or_name: str) -> Rule:
    """The rule with this code (``TP101``, any case) or kebab-case name (``cuda-method``).

    Raises:
        UnknownRuleError: nothing matches; the message suggests the closest codes/names.
    """
    key = code_or_name.strip()
    for rule in rules():
        if rule.code == key.upper() or rule.name == key.lower():
            return rule
    keys = [r.code for r in rules()] + [r.name for r in rules()]
    close = difflib.get_close_matches(key, keys, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownRuleError(f"no rule {code_or_name!r}.{hint} `torchport rules` lists them all.")


def _matches(rule: Rule, token: str) -> bool:
    token = token.strip()
    if token.upper() == "DEFAULT":      # the default set (what an empty select means), for extend-select
        return rule.default_enabled
    return token.upper() == "ALL" or rule.code.startswith(token.upper()) or rule.name == token.lower()


def select(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[Rule]:
    """Rules chosen by code prefixes / names.

    Args:
        select: prefixes (``TP1``, ``TP20``, ``TP101``), names, ``ALL`` or ``DEFAULT``; empty means the
            default set (everything but TP9xx).
        ignore: prefixes or names removed afterwards.

    Raises:
        UnknownRuleError: a token matches no rule (a typo would otherwise select nothing).
    """
    select, ignore = [t for t in select if t.strip()], [t for t in ignore if t.strip()]
    for token in (*select, *ignore):
        if not any(_matches(r, token) for r in rules()):
            get(token)  # raises with suggestions
    chosen = [r for r in rules() if any(_matches(r, t) for t in select)] if select else [
        r for r in rules() if r.default_enabled]
    return [r for r in chosen if not any(_matches(r, t) for t in ignore)]


@functools.lru_cache(maxsize=32)
def _ruleset(enabled: tuple[str, ...]):
    from torchport.migrate.ruleset import RuleSet

    run = [r for r in rules() if r.default_enabled or r.code in enabled]
    return RuleSet(run, enabled)


def ruleset(select_: Sequence[str] = (), ignore: Sequence[str] = ()):
    """The engine's :class:`~torchport.migrate.context.RuleSet` for a selection (cached)."""
    return _ruleset(tuple(r.code for r in select(select_, ignore)))
