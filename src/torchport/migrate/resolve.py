"""Qualified-name resolution from a module's imports, without a full scope analysis.

``import torch as t`` / ``from torch import cuda`` / ``from torch.cuda.amp import autocast``
/ ``import torch.cuda as tc`` all make a local name stand for a dotted path. The
:class:`ImportTable` records those bindings (statement-level walk, every block, source
order); :func:`qualname` turns ``t.cuda.synchronize`` back into
``torch.cuda.synchronize``. A name bound by a function parameter or a local assignment
shadows an import inside that function (the engine keeps that stack).

Why not LibCST's ``QualifiedNameProvider``: it runs a full scope analysis first, which
measured 4-5x slower than parsing itself on torch's sources; this table gives the
same answers for import aliases, which is what the rules match on.

Example::

    table = ImportTable.from_module(cst.parse_module("import torch.cuda as tc\\n"))
    qualname(cst.parse_expression("tc.synchronize"), table.aliases)  # 'torch.cuda.synchronize'
"""

from __future__ import annotations

from typing import Iterable, Iterator

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none

__all__ = ["ImportTable", "qualname", "dotted", "assigned_names", "param_names", "CANONICAL"]

# Public aliases of the same object, mapped to the one name rules match on.
CANONICAL: dict[str, str] = {
    "torch.autocast": "torch.amp.autocast",
    "torch.amp.autocast_mode.autocast": "torch.amp.autocast",
    "torch.cpu.amp.autocast": "torch.cpu.amp.autocast",
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel": "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel": "torch.nn.parallel.data_parallel",
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.distributed.distributed_c10d.init_process_group": "torch.distributed.init_process_group",
    "torch.serialization.load": "torch.load",
}
for _fn in ("empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
            "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats", "memory_summary",
            "mem_get_info", "set_per_process_memory_fraction"):
    CANONICAL[f"torch.cuda.memory.{_fn}"] = f"torch.cuda.{_fn}"
for _fn in ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
            "get_rng_state_all", "set_rng_state", "set_rng_state_all"):
    CANONICAL[f"torch.cuda.random.{_fn}"] = f"torch.cuda.{_fn}"
for _cls in ("Stream", "Event"):
    CANONICAL[f"torch.cuda.streams.{_cls}"] = f"torch.cuda.{_cls}"


def dotted(node: cst.BaseExpression | None) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def qualname(node: cst.BaseExpression, aliases: dict[str, str], shadowed: frozenset[str] = frozenset()) -> str | None:
    """The dotted path a Name/Attribute chain stands for, through the import aliases.

    Returns None when the chain's root is not bound by an import (a local variable,
    ``self``, a call result ...), or is shadowed in the current function.
    """
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    root = aliases.get(node.value)
    if root is None or node.value in shadowed:
        return None
    if not parts:
        return CANONICAL.get(root, root)
    parts.append(root)
    full = ".".join(reversed(parts))
    return CANONICAL.get(full, full)


class ImportTable:
    """Local name -> dotted path, for every import in a module.

    Attributes:
        aliases: all bindings, in source order (later imports of a name win).
        top_level: bindings made by module-level imports only (safe to use from a fix
            anywhere in the file).
        from_cuda: local names bound to something under ``torch.cuda`` (candidates for
            removal when a fix leaves them unused).
    """

    __slots__ = ("aliases", "top_level", "from_cuda")

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.top_level: dict[str, str] = {}
        self.from_cuda: set[str] = set()

    @classmethod
    def from_module(cls, module: cst.Module) -> "ImportTable":
        """Collect the imports of ``module`` (statement-level walk, every block)."""
        table = cls()
        for stmt, top in _import_statements(module.body, True):
            for name, target in _bindings(stmt):
                table.aliases[name] = target
                if top:
                    table.top_level[name] = target
                if target == "torch.cuda" or target.startswith("torch.cuda."):
                    table.from_cuda.add(name)
        # snippets and notebook cells use `torch` imported elsewhere: an unbound `torch` is torch
        # (this also keeps fixes idempotent when a fix adds the missing `import torch`)
        table.aliases.setdefault("torch", "torch")
        return table

    def module_alias(self, dotted_name: str) -> str | None:
        """The module-level local name bound to module ``dotted_name`` (``"torch"`` -> ``"t"``)."""
        for name, target in self.top_level.items():
            if target == dotted_name:
                return name
        return None


def _bindings(stmt: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, str]]:
    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            full = dotted(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                root = full.split(".", 1)[0]
                yield root, root
        return
    if stmt.relative:  # from . import x: a local module, never torch
        base = "<local>"
    else:
        base = dotted(stmt.module) if stmt.module is not None else None
        if base is None:
            return
    if isinstance(stmt.names, cst.ImportStar):
        return
    for alias in stmt.names:
        name = dotted(alias.name)
        if name is None:
            continue
        local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
        yield local, f"{base}.{name}"


def _blocks(stmt: cst.BaseCompoundStatement) -> Iterator[cst.BaseSuite]:
    body = getattr(stmt, "body", None)
    if body is not None:
        yield body
    for attr in ("orelse", "finalbody"):
        extra = getattr(stmt, attr, None)
        if extra is not None:
            yield extra.body if isinstance(extra, (cst.Else, cst.Finally)) else extra
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def _suite_statements(suite: cst.BaseSuite | cst.BaseCompoundStatement) -> Iterable[cst.CSTNode]:
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    if isinstance(suite, cst.SimpleStatementSuite):
        return (suite,)
    if isinstance(suite, cst.If):  # elif chains are nested If nodes in orelse
        return (suite,)
    return ()


def _import_statements(body: Iterable[cst.CSTNode], top: bool) -> Iterator[tuple[cst.Import | cst.ImportFrom, bool]]:
    for stmt in body:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield small, top
        elif isinstance(stmt, cst.BaseCompoundStatement):
            # module-level if/try blocks still bind module-level names
            nested_top = top and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
            for suite in _blocks(stmt):
                yield from _import_statements(_suite_statements(suite), nested_top)


def param_names(params: cst.Parameters) -> set[str]:
    """Every name a parameter list binds."""
    out = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            out.add(star.name.value)
    return out


def _target_names(target: cst.BaseExpression, out: set[str]) -> None:
    if isinstance(target, cst.Name):
        out.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            _target_names(el.value, out)
    elif isinstance(target, cst.StarredElement):
        _target_names(target.value, out)


def assigned_names(body: cst.BaseSuite) -> set[str]:
    """Names a function body binds by assignment, ``for``, ``with ... as`` or ``def``/``class``
    (statement level; nested functions are not entered)."""
    out: set[str] = set()
    stack: list[cst.CSTNode] = list(_suite_statements(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        _target_names(t.target, out)
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    _target_names(small.target, out)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            out.add(stmt.name.value)
        elif isinstance(stmt, cst.BaseCompoundStatement):
            if isinstance(stmt, cst.For):
                _target_names(stmt.target, out)
            elif isinstance(stmt, cst.With):
                for item in stmt.items:
                    if item.asname is not None:
                        _target_names(item.asname.name, out)
            for suite in _blocks(stmt):
                stack.extend(_suite_statements(suite))
    return out
