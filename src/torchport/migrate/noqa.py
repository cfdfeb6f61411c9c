"""``# noqa`` comments: which ones silence nothing (rule TP801), and ``scan --add-noqa``.

A ``# noqa: TP101`` comment is *unused* when no TP101 finding starts on its line. Only torchport's own codes are
judged (``TP101``, a prefix such as ``TP1``, flake8's ``TPT101`` spelling), and only when every rule a code names
ran (every default rule runs; a silenced rule that did not run proves nothing); a bare ``# noqa`` and other tools'
codes are left alone. The fix removes the unused codes (the whole comment when none is left) -- a text edit inside the comment, so
no other position moves.

``scan --add-noqa`` appends ``# noqa: CODES`` to each line where a finding starts (merging with a ``noqa``
comment already there), so a legacy tree can adopt torchport with every existing finding acknowledged.
"""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from torchport.migrate.ruleset import RuleSet

__all__ = ["NoqaComment", "comments", "unused", "unused_noqa", "strip", "add_noqa"]

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z0-9]+(?:[,\s]+[A-Za-z0-9]+)*))?", re.IGNORECASE)
_OURS = re.compile(r"^TPT?\d{1,3}$")


@dataclasses.dataclass(frozen=True)
class NoqaComment:
    """One ``# noqa: CODES`` comment: 1-based line, 0-based start column of the comment, its text, its codes."""

    line: int
    column: int
    text: str
    codes: tuple[str, ...]


def comments(source: str) -> list[NoqaComment]:
    """Every ``# noqa: ...`` comment with codes in ``source`` (real comments: tokenize, not text in strings)."""
    if "noqa" not in source.lower():
        return []
    out: list[NoqaComment] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and "noqa" in tok.string.lower():
                m = _NOQA.search(tok.string)
                if m is not None and m.group("codes"):
                    codes = tuple(c for c in re.split(r"[,\s]+", m.group("codes")) if c)
                    out.append(NoqaComment(tok.start[0], tok.start[1], tok.string, codes))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return out


def _canonical(code: str) -> str:
    code = code.upper()
    return "TP" + code[3:] if code.startswith("TPT") else code


def unused(source: str, reported: dict[int, set[str]], enabled: frozenset[str], all_codes: Iterable[str]
           ) -> list[tuple[NoqaComment, tuple[str, ...]]]:
    """The noqa comments with codes that silenced nothing: ``[(comment, unused codes as written)]``.

    Args:
        reported: line -> codes of the findings that start there (before suppression).
        enabled: the codes of the rules that ran this pass.
        all_codes: every rule code (a code naming no rule is not judged: maybe another tool's).
    """
    known = tuple(all_codes)
    out = []
    for c in comments(source):
        here = reported.get(c.line, set())
        bad = []
        for code in c.codes:
            want = _canonical(code)
            if not _OURS.match(code.upper()) or code.upper().startswith("TP8"):
                continue
            named = [k for k in known if k.startswith(want)]
            if not named or not all(k in enabled for k in named):
                continue
            if not any(k.startswith(want) for k in here):
                bad.append(code)
        if bad:
            out.append((c, tuple(bad)))
    return out


def strip(source: str, found: list[tuple[NoqaComment, tuple[str, ...]]]) -> str:
    """``source`` with the unused codes removed from their comments (the comment too when none is left)."""
    lines = source.splitlines(keepends=True)
    for c, bad in found:
        line = lines[c.line - 1]
        keep = [code for code in c.codes if code not in bad]
        m = _NOQA.search(c.text)
        assert m is not None
        new = c.text[:m.start()] + (f"# noqa: {', '.join(keep)}" if keep else "") + c.text[m.end():]
        new = new.strip()
        before = line[:c.column]
        rest = line[c.column + len(c.text):]
        if not new or new == "#":
            before = before.rstrip(" \t")
            new = ""
        lines[c.line - 1] = before + new + rest
    return "".join(lines)


def add_noqa(report) -> tuple[int, list[str]]:
    """Append ``# noqa: CODES`` to every line where a remaining finding of ``report`` starts; files written
    atomically (only if unchanged since the scan). Returns (comments added, one error line per file left alone)."""
    from torchport.migrate.runner import _read, write_back

    added, errors = 0, []
    by_file: dict[str, dict[int, set[str]]] = {}
    for f in report.remaining:
        if f.cell is not None:
            errors.append(f"{f.path}: --add-noqa does not edit notebooks; add the comments in Jupyter")
            by_file.pop(f.path, None)
            continue
        by_file.setdefault(f.path, {}).setdefault(f.line, set()).add(f.code)
    for path, lines in sorted(by_file.items()):
        try:
            text, encoding, data = _read(path)
        except (OSError, SyntaxError, UnicodeDecodeError, LookupError) as exc:
            errors.append(f"{path}: could not read: {exc}")
            continue
        open_string = _lines_ending_in_a_string(text)
        existing = {c.line: c for c in comments(text)}
        out = text.splitlines(keepends=True)
        n = 0
        for line, codes in sorted(lines.items()):
            if line in open_string or line > len(out):
                errors.append(f"{path}:{line}: a string continues past this line; add its noqa comment by hand")
                continue
            body = out[line - 1]
            ending = body[len(body.rstrip("\r\n")):]
            body = body.rstrip("\r\n")
            c = existing.get(line)
            if c is not None:
                merged = list(c.codes) + [k for k in sorted(codes) if k not in c.codes]
                m = _NOQA.search(c.text)
                new = c.text[:m.start()] + f"# noqa: {', '.join(merged)}" + c.text[m.end():]
                body = body[:c.column] + new + body[c.column + len(c.text):]
            elif "#" in body and _has_comment(body):
                body = body + f"  # noqa: {', '.join(sorted(codes))}"
            else:
                body = body.rstrip() + f"  # noqa: {', '.join(sorted(codes))}"
            out[line - 1] = body + ending
            n += 1
        if n:
            problem = write_back(path, "".join(out), encoding, expected=data)
            if problem is not None:
                errors.append(f"{path}: {problem}")
                continue
            added += n
    return added, errors


def _has_comment(line: str) -> bool:
    try:
        return any(t.type == tokenize.COMMENT for t in tokenize.generate_tokens(io.StringIO(line + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False


def _lines_ending_in_a_string(text: str) -> set[int]:
    """Lines whose end lies inside a (triple-quoted) string: a comment cannot go there."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0], tok.end[0]))
            elif getattr(tokenize, "FSTRING_MIDDLE", None) == tok.type and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return inside


def unused_noqa(source: str, path: str, ruleset: RuleSet, raws: list, pos: dict) -> list:
    """TP801: the ``# noqa`` comments whose torchport codes silence nothing, as ``[(comment, codes, Finding)]``
    (:func:`unused` judges them); empty when TP801 is not selected. ``raws``: every finding of the pass
    (selected or not: the rules that ran are judged)."""
    if "TP801" not in ruleset.enabled or "noqa" not in source.lower():
        return []
    from torchport.migrate import catalog
    from torchport.migrate.finding import Finding

    reported: dict[int, set[str]] = {}
    for r in raws:
        reported.setdefault(pos[r.node][0], set()).add(r.rule.code)
    rule = catalog.get("TP801")
    out = []
    ran = frozenset(r.code for r in ruleset.rules)
    for c, bad in unused(source, reported, ran, [r.code for r in catalog.rules()]):
        what = ", ".join(bad)
        msg = (f"unused noqa: {what} {'silences' if len(bad) == 1 else 'silence'} nothing on this line; "
               "remove " + ("it" if len(bad) == len(c.codes) else "the unused code(s)"))
        out.append((c, bad, Finding(path=path, line=c.line, column=c.column + 1, end_line=c.line,
                                    end_column=c.column + 1 + len(c.text), code=rule.code, name=rule.name,
                                    message=msg, severity=rule.severity, fix_safety="safe")))
    return out
