"""Import bookkeeping for fixes: add ``import torchport`` once, drop imports a fix left unused.

Both work on module-level statements only, so they can never leave an empty block.
"""

from __future__ import annotations

from typing import Iterable

import libcst as cst

__all__ = ["add_imports", "insert_after_imports", "binding_statement", "drop_unused", "count_names"]


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def add_imports(module: cst.Module, modules: Iterable[str]) -> cst.Module:
    """Insert ``import <name>`` for each of ``modules`` after the module's leading imports.

    The insertion point is after the last import of the leading block (docstring,
    ``from __future__`` and other imports), so the new lines sit with the others.
    """
    wanted = sorted(set(modules))
    if not wanted:
        return module
    new = [cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(name=cst.Name(m))])]) for m in wanted]
    return insert_after_imports(module, new)


def insert_after_imports(module: cst.Module, statements: list[cst.BaseStatement], *, not_before: int = 0) -> cst.Module:
    """Insert module-level ``statements`` after the leading block of docstring and imports (and not before
    the top-level statement ``not_before``)."""
    body = list(module.body)
    insert_at = 0
    for i, stmt in enumerate(body):
        if _is_import_line(stmt):
            insert_at = i + 1
        elif i == 0 and _is_docstring(stmt):
            insert_at = 1
        else:
            break
    insert_at = max(insert_at, not_before)
    if insert_at == 0 and body:
        # a blank line between the new lines and the code; the code keeps its comments
        first = body[0]
        lines = list(first.leading_lines)
        if not lines or lines[0].comment is not None:
            body[0] = first.with_changes(leading_lines=[cst.EmptyLine(), *lines])
        body = list(statements) + body
    else:
        body[insert_at:insert_at] = statements
    return module.with_changes(body=body)


def binding_statement(module: cst.Module, name: str) -> int | None:
    """The index of the first top-level statement that imports ``name`` (``import torch`` inside a
    ``try:`` counts), or None."""

    class _Finder(cst.CSTVisitor):
        found = False

        def visit_Import(self, node: cst.Import) -> bool:
            self.found = self.found or any(_local_name(a) == name for a in node.names)
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            if not isinstance(node.names, cst.ImportStar):
                self.found = self.found or any(_local_name(a) == name for a in node.names)
            return False

    for i, stmt in enumerate(module.body):
        finder = _Finder()
        stmt.visit(finder)
        if finder.found:
            return i
    return None


class _NameCounter(cst.CSTVisitor):
    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names
        self.counts: dict[str, int] = dict.fromkeys(names, 0)

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # the attribute name itself is not a reference
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # a keyword (`f(amp=True)`) is not a reference either
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.counts[node.value] += 1

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:  # skip per-field hook lookups
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None


def count_names(module: cst.CSTNode, names: set[str]) -> dict[str, int]:
    """How often each of ``names`` is referenced (imports, attribute names and keywords excluded)."""
    counter = _NameCounter(names)
    module.visit(counter)
    return counter.counts


def _local_name(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None:
        return alias.asname.name.value if isinstance(alias.asname.name, cst.Name) else None
    node = alias.name
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def drop_unused(module: cst.Module, names: set[str]) -> cst.Module:
    """Remove ``names`` from module-level import statements (a statement left empty goes)."""
    if not names:
        return module
    body: list[cst.BaseStatement] = []
    changed = False
    for stmt in module.body:
        if not _is_import_line(stmt):
            body.append(stmt)
            continue
        smalls = []
        for small in stmt.body:
            if isinstance(small.names, cst.ImportStar):
                smalls.append(small)
                continue
            keep = [a for a in small.names if _local_name(a) not in names]
            if len(keep) == len(small.names):
                smalls.append(small)
                continue
            changed = True
            if keep:
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                upd = small.with_changes(names=keep)
                if isinstance(small, cst.ImportFrom) and small.lpar is not None and len(keep) == 1:
                    upd = upd.with_changes(lpar=None, rpar=None)
                smalls.append(upd)
        if smalls:
            if len(smalls) != len(stmt.body):
                smalls[-1] = smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            body.append(stmt.with_changes(body=smalls))
        elif stmt.leading_lines:
            body.append(_Carry(stmt.leading_lines))  # comments above it move to the next statement
    if not changed:
        return module
    out: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] = []
    for stmt in body:
        if isinstance(stmt, _Carry):
            carry.extend(stmt.lines)
            continue
        if carry:
            stmt = stmt.with_changes(leading_lines=[*carry, *stmt.leading_lines])
            carry = []
        out.append(stmt)
    return module.with_changes(body=out, footer=[*carry, *module.footer] if carry else module.footer)


class _Carry:
    """Comments above a removed statement, moved onto the next statement."""

    def __init__(self, lines) -> None:
        self.lines = list(lines)
