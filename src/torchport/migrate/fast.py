"""The fast scan: the standard library's ``ast`` finds where a rule *could* fire; LibCST sees only that.

A full LibCST pass (parse, one walk, positions) costs ~0.5 ms per line of a file; ``ast.parse`` is about an
order of magnitude cheaper. :func:`scan` therefore works in three steps:

1. **triggers** (:func:`triggers`): one ``ast`` walk marks each statement holding a node at which the engine
   would call a rule hook -- derived from the selected rules' own declarations (:class:`~torchport.migrate.
   context.RuleSet`: ``names`` / ``name_prefixes`` through the file's import aliases, ``methods``,
   ``attributes``, ``strings``, ``values`` (any string holding a device word), ``if_exps``, ``assignments``,
   ``imports``). Every check is looser than the engine's own (no shadowing, every sub-chain, every string), so
   the marked set is a superset of the statements where a hook runs. No mark: no finding, and no LibCST.
2. **slice** (:func:`slice_source`): the statements that hold no mark, no import and no rebinding of an import
   alias are blanked (their first line becomes ``pass`` at the same indentation, the rest empty lines), so
   every kept line keeps its number and text -- positions, ``# noqa`` lines and messages are those of the full
   file.
3. the engine's normal walk over the sliced module, with a context (:class:`~torchport.migrate.sliced.SlicedContext`) that serves the
   *whole* file's text for ``ctx.module.code`` and records any use of state that a blanked statement could have
   changed: the file's bindings and parameters (``ctx.int_device``), import-use counts, a walk over
   ``ctx.module``, the dispatch subjects. A rule that asked for such state gets its file analysed again by the
   full pass (:func:`torchport.migrate.engine.analyze`) -- a rule added tomorrow that reads the whole file is
   slower, never wrong.

``tests/migrate/test_fast_engine.py`` checks both engines agree on every fixture and over the installed
torch / timm / accelerate sources.
"""

from __future__ import annotations

import ast
import collections
import io
from typing import Iterable, NamedTuple

from torchport.migrate.resolve import CANONICAL
from torchport.migrate.ruleset import DEVICE_TEXT, RuleSet

__all__ = ["triggers", "slice_source", "scan", "Triggers"]

#: sliced walks before giving up on a file (each round keeps the bindings the previous one asked for)
_ROUNDS = 3
_STMT_LISTS = ("body", "orelse", "finalbody")
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
             ast.With, ast.AsyncWith, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + (
             (ast.Match,) if hasattr(ast, "Match") else ())
_COMPOUND_SET = frozenset(_COMPOUND)
_MATCH_CASE = getattr(ast, "match_case", None)


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted path for every import (any depth), as :class:`~torchport.migrate.resolve.ImportTable`
    (a later import of a name, in ``ast.walk``'s order, wins)."""
    out: dict[str, str] = {}
    for node in _imports(tree):
        if type(node) is ast.Import:
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    root = a.name.split(".", 1)[0]
                    out[root] = root
        else:
            base = "<local>" if node.level else node.module
            if base is None:
                continue
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{base}.{a.name}"
    out.setdefault("torch", "torch")
    return out


_BLOCKS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def _imports(tree: ast.Module) -> list:
    """Every import statement of the module, at any depth, in ``ast.walk``'s (breadth-first) order. Imports are
    statements: only statement lists (and the handlers and cases holding them) are followed, no expression."""
    out: list = []
    queue = collections.deque(tree.body)
    while queue:
        node = queue.popleft()
        t = type(node)
        if t is ast.Import or t is ast.ImportFrom:
            out.append(node)
        elif t in _COMPOUND_SET or t is ast.ExceptHandler or t is _MATCH_CASE:
            for f in node._fields:
                if f in _BLOCKS:
                    queue.extend(getattr(node, f))
    return out


#: fields that never hold a node a mark can be found in (identifiers, flags, operators, contexts)
_LEAF_FIELDS = frozenset({"ctx", "id", "attr", "arg", "name", "names", "module", "level", "kind", "conversion",
                          "is_async", "simple", "type_comment", "op", "ops", "kwd_attrs", "rest", "tag"})


def _node_fields(cls: type) -> tuple[str, ...]:
    if cls is ast.Constant or cls is getattr(ast, "MatchSingleton", None) or not issubclass(cls, ast.AST):
        return ()
    return tuple(f for f in cls._fields if f not in _LEAF_FIELDS)


#: node type -> the fields :func:`_nodes` follows
_FIELDS: dict[type, tuple[str, ...]] = {
    c: _node_fields(c) for c in vars(ast).values() if isinstance(c, type) and issubclass(c, ast.AST)}


def _nodes(root: ast.AST) -> list[ast.AST]:
    """Every node under ``root`` (itself included) that can hold a mark, in no particular order: ``ast.walk``
    without its generators (identifier, operator and context nodes are not followed)."""
    out: list[ast.AST] = []
    stack = [root]
    pop, push, extend, add = stack.pop, stack.append, stack.extend, out.append
    fields = _FIELDS
    while stack:
        node = pop()
        if node is None:    # a dict's ``**`` key, a keyword-only argument without a default
            continue
        add(node)
        names = fields.get(type(node))
        if names is None:
            names = fields[type(node)] = _node_fields(type(node))
        for f in names:
            v = getattr(node, f, None)
            if v is None:
                continue
            if type(v) is list:
                extend(v)
            else:
                push(v)
    return out


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return node.id, parts


#: the node types :meth:`_Marker.node_hit` answers for (besides names, which the walk checks itself)
_MARK_TYPES = frozenset({ast.Constant, ast.Attribute, ast.IfExp, ast.Assign})


class _Marker:
    """Decides whether an expression subtree holds a node at which a rule hook may run."""

    def __init__(self, rs: RuleSet, aliases: dict[str, str]) -> None:
        self.rs, self.aliases = rs, aliases
        self.strings = frozenset(rs.strings)
        self.if_exps = rs.if_exp_marks
        self.methods, self.attributes = rs.methods, rs.attributes
        #: methods whose every rule is gated: a call to one is judged by the gates (:meth:`gated_call`)
        self.gated_methods = frozenset(m for m, rules in rs.methods.items()
                                       if all(rs.gated_for(r, None) for r in rules))
        #: methods a call to which marks its statement (no attribute access does: only a call reaches ``on_method``)
        self.marking_methods = frozenset(rs.methods) - self.gated_methods
        self.assignments = rs.assignments
        self._seen: dict[str, bool] = {}

    def _rules(self, q: str):
        return self.rs.lookup(CANONICAL.get(q, q)) or self.rs.lookup(q)

    def _named(self, q: str) -> bool:
        """A reference to ``q`` may reach a rule (gated rules act only on calls: see :meth:`gated_call`)."""
        hit = self._seen.get(q)
        if hit is None:
            canonical, gated_for = CANONICAL.get(q, q), self.rs.gated_for
            hit = self._seen[q] = any(not gated_for(r, canonical) for r in self._rules(q))
        return hit

    def gated_call(self, call: ast.Call) -> list | None:
        """``[(rule, qualname)]`` when ``call`` reaches gated rules only (its callee's qualified name, or a gated
        method: qualname None); None when no gate decides (the callee's own marks do)."""
        func = call.func
        if type(func) is ast.Attribute and func.attr in self.gated_methods:
            # on_method (a receiver that is not an import -- or one a local name shadows); an import-rooted
            # chain is marked by its own qualified name as well
            return [(r, None) for r in self.rs.methods[func.attr]]
        chain = _chain(func)
        if chain is None or chain[0] not in self.aliases:
            return None
        root, parts = chain
        q = ".".join([self.aliases[root], *reversed(parts)])
        rules, canonical = self._rules(q), CANONICAL.get(q, q)
        if rules and all(self.rs.gated_for(r, canonical) for r in rules):
            return [(r, canonical) for r in rules]
        return None

    def qualname_hit(self, node: ast.AST) -> bool:
        chain = _chain(node)
        if chain is None:
            return False
        root, parts = chain
        target = self.aliases.get(root)
        if target is None:
            return False
        q = target
        if self._named(q):
            return True
        for part in reversed(parts):    # every prefix of the chain (the engine resolves the longest it can)
            q = f"{q}.{part}"
            if self._named(q):
                return True
        return False

    def node_hit(self, node: ast.AST) -> bool:
        """True when the engine may call a hook at ``node`` itself (not its children)."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                if v in self.strings:
                    return True
                if DEVICE_TEXT.match(v) is not None:  # values rules, and ctx.dispatch_subjects
                    return True
            return False
        if isinstance(node, ast.Name):
            return node.id in self.aliases and self.qualname_hit(node)
        if isinstance(node, ast.Attribute):
            if node.attr in self.attributes:
                return True
            return self.qualname_hit(node)
        if isinstance(node, ast.IfExp):
            return self.if_exps
        if isinstance(node, ast.Assign):
            if self.assignments:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and self.qualname_hit(t):
                        return True
            return False
        return False


def _header_nodes(stmt: ast.stmt) -> Iterable[ast.AST]:
    """The parts of a compound statement outside its statement lists (test, iter, decorators, handlers' types)."""
    for name, value in ast.iter_fields(stmt):
        if name in _STMT_LISTS:
            continue
        if name == "handlers":
            for h in value:
                if h.type is not None:
                    yield h.type
            continue
        if name == "cases":
            for c in value:
                yield c.pattern
                if c.guard is not None:
                    yield c.guard
            continue
        if isinstance(value, list):
            yield from (v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            yield value


def _child_lists(stmt: ast.stmt) -> Iterable[list[ast.stmt]]:
    for name in _STMT_LISTS:
        value = getattr(stmt, name, None)
        if value:
            yield value
    for h in getattr(stmt, "handlers", ()):
        yield h.body
    for c in getattr(stmt, "cases", ()):
        yield c.body


def _key(node: ast.AST) -> str | None:
    """The engine's binding key (``x``, ``self.x``) of a target or a reference, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _bound(targets: Iterable[ast.AST], out: set[str]) -> None:
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            _bound(t.elts, out)
        elif isinstance(t, ast.Starred):
            _bound([t.value], out)
        else:
            k = _key(t)
            if k is not None:
                out.add(k)


def _binds(stmt: ast.stmt) -> set[str]:
    """Keys the engine's ``note_binding`` records for this statement (assignments and ``for`` targets)."""
    out: set[str] = set()
    if isinstance(stmt, ast.Assign):
        _bound(stmt.targets, out)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        _bound([stmt.target], out)
    return out


class Triggers:
    """What :func:`triggers` found: whether any hook may run, the statements to keep (``id()`` of their ast
    nodes), and which statements bind each key (``x``, ``self.x``), to keep more on demand (:meth:`extend`)."""

    def __init__(self, hit: bool, parent: dict[int, ast.stmt | None], binders: dict[str, list[ast.stmt]],
                 neighbours: dict[int, tuple[ast.stmt, ...]] | None = None) -> None:
        self.hit, self.parent, self.binders = hit, parent, binders
        self.neighbours = neighbours or {}
        self.keep: set[int] = set()

    def _chain(self, stmt: ast.stmt) -> None:
        """Keep ``stmt`` and, for an ``if``, its ``elif`` chain: a blanked ``elif`` would leave a ``pass`` after
        the ``if`` instead, and :func:`torchport.migrate.handled.judge` reads a finding's whole if-chain."""
        while True:
            self.keep.add(id(stmt))
            if type(stmt) is not ast.If or len(stmt.orelse) != 1 or type(stmt.orelse[0]) is not ast.If:
                return
            stmt = stmt.orelse[0]

    def add(self, stmts: Iterable[ast.stmt]) -> None:
        """Keep these statements, their frames, the ``elif`` chain of each, and each one's neighbouring ``if``
        and single-target assignment (what :func:`~torchport.migrate.handled.judge` compares a finding's
        statement and frames with: ``is_cuda = ...`` next to ``is_npu = ...``)."""
        todo = list(stmts)
        done: set[int] = set()
        while todo:
            stmt = todo.pop()
            if id(stmt) in done:
                continue
            done.add(id(stmt))
            self._chain(stmt)
            for n in self.neighbours.get(id(stmt), ()):
                self._chain(n)
            up = self.parent[id(stmt)]
            if up is not None:
                todo.append(up)

    def extend(self, keys: Iterable[str]) -> None:
        """Keep every statement binding one of ``keys`` too."""
        self.add(b for k in keys for b in self.binders.get(k, ()))

    @property
    def dropped_keys(self) -> frozenset[str]:
        """The keys a dropped statement binds."""
        return frozenset(k for k, stmts in self.binders.items() if any(id(b) not in self.keep for b in stmts))


def triggers(tree: ast.Module, rs: RuleSet) -> Triggers:
    """Mark the statements the engine must see.

    Kept: a statement holding a node where a hook may run, an import, a rebinding of an import alias (it
    shadows the import for the engine), a function taking a device-index parameter (``rank``, ``gpu`` ...: the
    file's parameter set), and the statements around a kept one (its frame). The keys bound by dropped
    statements are returned: a rule that asks the context for one of those (``ctx.int_device`` follows the
    file's bindings by name) gets them kept in a second round (:func:`scan`)."""
    from torchport.migrate.ruleset import DEVICE_INDEX_NAMES

    aliases = _aliases(tree)
    marker = _Marker(rs, aliases)
    any_hit = False
    parent: dict[int, ast.stmt | None] = {}
    binders: dict[str, list[ast.stmt]] = {}
    neighbours: dict[int, tuple[ast.stmt, ...]] = {}
    todo: list[ast.stmt] = []
    prekeys: set[str] = set()

    pending: list[tuple[ast.stmt, ast.Call, list]] = []

    def scan_expr(root: ast.AST, stmt: ast.stmt) -> int:
        """2: a hook may run in ``root``; 1: keep it (an import, an alias rebound); 0: neither. The binding
        keys of the arguments of a call that may reach a rule go to ``prekeys`` (kept in the first round:
        ``ctx.int_device`` asks about them)."""
        found = 0
        for node in _nodes(root):
            t = type(node)
            if t is ast.Name:
                if node.id in aliases:
                    if type(node.ctx) is not ast.Load:
                        found = found or 1
                    elif found < 2 and marker.qualname_hit(node):
                        found = 2
            elif t is ast.Call:
                func = node.func
                if found < 2 and (marker.gated_methods or marker.rs.gated):
                    gates = marker.gated_call(node)
                    if gates is not None:
                        pending.append((stmt, node, gates))
                if found < 2 and type(func) is ast.Attribute and func.attr in marker.marking_methods:
                    found = 2     # on_method: a call, never a bare attribute (``device.type``)
                if (type(func) is ast.Attribute and func.attr in marker.methods) or marker.qualname_hit(func):
                    for arg in (*node.args, *(k.value for k in node.keywords)):
                        k = _key(arg)
                        if k is not None:
                            prekeys.add(k)
            elif found < 2 and t in _MARK_TYPES and marker.node_hit(node):
                found = 2
            elif t is ast.Import or t is ast.ImportFrom:
                found = found or 1
        return found

    def visit(stmts: list[ast.stmt], up: ast.stmt | None) -> None:
        nonlocal any_hit
        last = len(stmts) - 1
        for i, stmt in enumerate(stmts):
            parent[id(stmt)] = up
            near = tuple(s for s in (stmts[i - 1] if i else None, stmts[i + 1] if i < last else None)
                         if s is not None and (type(s) is ast.If or (type(s) is ast.Assign and len(s.targets) == 1)))
            if near:
                neighbours[id(stmt)] = near
            if isinstance(stmt, _COMPOUND):
                found = max((scan_expr(n, stmt) for n in _header_nodes(stmt)), default=0)
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if stmt.name in aliases:
                        found = max(found, 1)
                    if not isinstance(stmt, ast.ClassDef) and any(
                            a.arg in DEVICE_INDEX_NAMES for a in (*stmt.args.posonlyargs, *stmt.args.args,
                                                                 *stmt.args.kwonlyargs)):
                        found = max(found, 1)
                for body in _child_lists(stmt):
                    visit(body, stmt)
            else:
                found = 1 if isinstance(stmt, (ast.Import, ast.ImportFrom)) else scan_expr(stmt, stmt)
            any_hit = any_hit or found == 2
            for k in _binds(stmt):
                binders.setdefault(k, []).append(stmt)
            if found:
                todo.append(stmt)

    visit(tree.body, None)
    for stmt, call, gates in pending:    # calls only gated rules take: now that the file's bindings are known
        if any(rule.fast_call_gate(call, q, binders) for rule, q in gates):
            any_hit = True
            todo.append(stmt)
            for arg in (*call.args, *(k.value for k in call.keywords)):   # as scan_expr does for a marked call
                k = _key(arg)
                if k is not None:
                    prekeys.add(k)
    found = Triggers(any_hit or _imports_hook(rs, tree), parent, binders, neighbours)
    found.add(todo)
    found.extend(prekeys)
    return found


def _imports_hook(rs: RuleSet, tree: ast.Module) -> bool:
    """True when an import statement goes to a rule (``imports`` declarations)."""
    wanted = rs.import_modules
    if not wanted:
        return False

    def hit(module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in wanted)

    for node in _imports(tree):
        if isinstance(node, ast.Import) and any(hit(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and node.module and hit(node.module):
            return True
    return False


def _lines(text: str) -> list[str]:
    """Physical lines with their endings, split as the tokenizer does (``\\n``, ``\\r\\n``, ``\\r``)."""
    return io.StringIO(text, newline="").readlines()


def slice_source(text: str, tree: ast.Module, keep: set[int]) -> str | None:
    """``text`` with every maximal statement not in ``keep`` blanked (``pass`` on its first line); None when a
    statement to drop shares a line with other code (the caller then uses the whole file)."""
    lines = _lines(text)
    raw = [ln.encode("utf-8") for ln in lines]
    drops: list[tuple[int, int, bytes]] = []

    def droppable(stmt: ast.stmt) -> tuple[int, int, bytes] | None:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        last = stmt.end_lineno or stmt.lineno
        col = stmt.col_offset if first == stmt.lineno else 0
        head, tail = raw[first - 1], raw[last - 1]
        if first != stmt.lineno:     # decorators: the first decorator's '@' starts its line
            dec = min(getattr(stmt, "decorator_list"), key=lambda d: d.lineno)
            col = head.index(b"@") if b"@" in head[:dec.col_offset] else -1
            if col < 0 or head[:col].strip():
                return None
        if head[:col].strip():
            return None
        rest = tail[stmt.end_col_offset or 0:].strip()
        if rest and not rest.startswith(b"#"):
            return None
        return first, last, head[:col]

    def visit(stmts: list[ast.stmt]) -> bool:
        for stmt in stmts:
            if id(stmt) in keep:
                if isinstance(stmt, _COMPOUND):
                    for body in _child_lists(stmt):
                        if not visit(body):
                            return False
                continue
            span = droppable(stmt)
            if span is None:
                return False
            drops.append(span)
        return True

    if not visit(tree.body):
        return None
    out = list(lines)
    for first, last, indent in drops:
        for i in range(first - 1, last):
            ending = lines[i][len(lines[i].rstrip("\r\n")):]
            out[i] = ending
        ending = lines[first - 1][len(lines[first - 1].rstrip("\r\n")):] or "\n"
        out[first - 1] = indent.decode("utf-8") + "pass" + ending
    return "".join(out)


def scan(source: str, path: str, ruleset: RuleSet, *, emit: str = "torchport"):
    """Scan one file's source with the fast path; the same :class:`FileResult` as ``engine.analyze(source, path,
    ruleset, emit=emit)`` (the full pass runs whenever the fast one cannot vouch for its answer)."""
    from torchport.migrate.finding import FileResult, line_count

    result = FileResult(path=path, lines=line_count(source))
    if ruleset.prefilter is None or ruleset.prefilter.search(source) is None:
        return result
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        from torchport.migrate import engine

        return engine.analyze(source, path, ruleset, emit=emit)   # LibCST's grammar and its error message
    found = triggers(tree, ruleset)
    if not found.hit:   # no hook can run: no finding, but a noqa comment may silence nothing (TP801)
        from torchport.migrate.noqa import unused_noqa

        result.analysed = True
        result.findings = [f for _, _, f in unused_noqa(source, path, ruleset, [], {})]
        return result
    from torchport.migrate import engine     # LibCST from here on (imported by the first file that gets here)
    from torchport.migrate.sliced import WholeFile

    for _ in range(_ROUNDS):
        sliced = slice_source(source, tree, found.keep)
        if sliced is None or sliced == source:
            break
        try:
            fast = engine.analyze(source, path, ruleset, emit=emit, sliced=sliced, dropped_keys=found.dropped_keys)
        except (WholeFile, Exception):  # noqa: BLE001 - a rule that stumbled on the sliced module: the full pass
            break
        if isinstance(fast, FileResult):
            return fast
        if not fast:       # whole-file state was used
            break
        found.extend(fast)
    return engine.analyze(source, path, ruleset, emit=emit)
