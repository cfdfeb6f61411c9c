"""What ``torchport fix`` writes: the torchport runtime (``--emit torchport``) or torch core (``--emit torch``).

The rules build every fix in one vocabulary, the torchport runtime's (``torchport.device()``,
``torchport.current().type``, ``torchport.select_device(index=i)`` ...). With ``--emit torch`` one more
pass, :func:`lower`, rewrites the spellings that torch >= 2.7 has into torch core, so the fixed file
needs nothing but torch:

* the device becomes one module-level name, hoisted after the imports::

      DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

  (``check_available=True``: a CUDA wheel on a host without a GPU says "cuda" otherwise);
* calls that raise without an accelerator (``set_device_index``, ``synchronize``, the memory API)
  become guarded *statements*: ``if torch.accelerator.is_available(): ...``; used as a value they
  stay on torchport;
* ``device_count()`` becomes ``max(1, torch.accelerator.device_count())``, 1 on the CPU as the
  torchport runtime counts, so ``mp.spawn(nprocs=...)`` still starts one process there.

What torch lacks stays on the runtime: ``torchport.tune(...)`` for backend knobs other than
cuDNN's (those stay as written: harmless off CUDA), ``backend.bf16_supported()``. DDP keeps its
``device_ids`` behind ``torch.accelerator.is_available()`` (the rule writes that itself). The
table in docs/migrate-corpus.md lists each spelling. The file's own style wins
(:attr:`~torchport.migrate.context.FileContext.emit_torch`): a file that imports torchport keeps the
runtime, one already written against ``torch.accelerator`` is lowered with either choice -- so a second
``fix``, of either kind, changes nothing.
"""

from __future__ import annotations

import re

import libcst as cst

from torchport.migrate.config import EMITS
from torchport.migrate.imports import binding_statement, count_names, insert_after_imports

__all__ = ["EMITS", "lower", "DEVICE_NAMES", "message"]

# EMITS (the ``--emit`` choices, the first the default) is defined in config and re-exported here.
#: the hoisted device's name: the first one the file does not use already
DEVICE_NAMES = ("DEVICE", "TORCH_DEVICE", "ACCELERATOR_DEVICE")

_AVAILABLE = "{T}.accelerator.is_available()"
#: expressions: torchport spelling -> torch spelling ({T}: torch's local name, {D}: the hoisted device)
_EXPRESSIONS = {
    "torchport.device()": "{D}",
    "torchport.current().type": "{D}.type",
    "torchport.current().module": "{T}.get_device_module({D})",
    "torchport.current().is_accelerator": _AVAILABLE,
    "torchport.current().backend.pin_memory": _AVAILABLE,
    "torchport.current().backend.device_count()": "max(1, {T}.accelerator.device_count())",
    "torchport.current().backend.dist_backend": "{dist}.get_default_backend_for_device({D})",
    "torchport.current().index": f"({{T}}.accelerator.current_device_index() if {_AVAILABLE} else 0)",
}
#: ``(torchport.memory_stats()[KEY] or 0)`` -> the torch.accelerator function for KEY, guarded
_MEMORY = {"allocated_bytes": "memory_allocated", "peak_bytes": "max_memory_allocated",
           "reserved_bytes": "memory_reserved"}
#: statements: ``torchport.<name>(...)`` -> ``if torch.accelerator.is_available(): torch.accelerator.<call>(...)``
_STATEMENTS = {"synchronize": ("synchronize", ()), "empty_cache": ("empty_cache", ()),
               "reset_peak_memory": ("reset_peak_memory_stats", ()), "select_device": ("set_device_index", ("index",))}

_EMPTY = cst.Module(body=[])

#: in messages, the device torch core has for what the fix hoists as DEVICE
_MESSAGE_DEVICE = "torch.accelerator.current_accelerator()"
_MESSAGE_SPELLINGS = {
    **{tp: torch.format(T="torch", D=_MESSAGE_DEVICE, dist="torch.distributed") for tp, torch in _EXPRESSIONS.items()},
    **{f"torchport.{name}()": f"torch.accelerator.{call}()" for name, (call, _) in _STATEMENTS.items()
       if name != "select_device"},
    "torchport.select_device(index=i)": "torch.accelerator.set_device_index(i)",
    "torchport.memory_stats()": "torch.accelerator.memory_stats()",
}
_BACKTICKED = re.compile(r"`([^`]*torchport\.[^`]*)`")


def message(text: str) -> str:
    """A finding's message as ``--emit torch`` fixes read: each backticked torchport spelling that torch core
    has becomes torch's (`torchport.device()` -> `torch.accelerator.current_accelerator()`); what torch lacks
    stays, as the fix keeps it on the runtime."""
    def swap(m: re.Match) -> str:
        spelled = m.group(1)
        for tp, torch in _MESSAGE_SPELLINGS.items():
            if tp in spelled:
                spelled = spelled.replace(tp, torch)
        return f"`{spelled}`"

    return _BACKTICKED.sub(swap, text) if "torchport." in text else text


def _code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def _rooted_at(node: cst.CSTNode, name: str) -> bool:
    """True for ``name.a().b`` chains (attributes and calls down to the Name ``name``)."""
    while True:
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return isinstance(node, cst.Name) and node.value == name


class _Lower(cst.CSTTransformer):
    def __init__(self, torch: str, dist: str, device: str) -> None:
        super().__init__()
        self.names = {"T": torch, "dist": dist, "D": device}
        self.used_device = False

    def _expr(self, template: str) -> cst.BaseExpression:
        if "{D}" in template:
            self.used_device = True
        return cst.parse_expression(template.format(**self.names))

    def _swap(self, updated: cst.BaseExpression) -> cst.BaseExpression:
        if not _rooted_at(updated, "torchport"):
            return updated
        template = _EXPRESSIONS.get(_code(updated.with_changes(lpar=[], rpar=[])))
        if template is None:
            return updated
        new = self._expr(template)
        if updated.lpar:  # keep the source's own parentheses
            new = new.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return new

    def leave_Attribute(self, original_node, updated_node):
        return self._swap(updated_node)

    def leave_Call(self, original_node, updated_node):
        return self._swap(updated_node)

    def leave_BooleanOperation(self, original_node, updated_node):
        left, right = updated_node.left, updated_node.right
        if not (isinstance(updated_node.operator, cst.Or) and isinstance(right, cst.Integer) and right.value == "0"
                and isinstance(left, cst.Subscript) and _code(left.value) == "torchport.memory_stats()"
                and len(left.slice) == 1 and isinstance(left.slice[0].slice, cst.Index)
                and isinstance(left.slice[0].slice.value, cst.SimpleString)):
            return updated_node
        fn = _MEMORY.get(left.slice[0].slice.value.evaluated_value)
        if fn is None:
            return updated_node
        new = self._expr(f"({{T}}.accelerator.{fn}() if {_AVAILABLE} else 0)")
        return new.with_changes(lpar=updated_node.lpar or new.lpar, rpar=updated_node.rpar or new.rpar)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) != 1 or not isinstance(updated_node.body[0], cst.Expr):
            return updated_node
        call = updated_node.body[0].value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and isinstance(call.func.value, cst.Name) and call.func.value.value == "torchport"):
            return updated_node
        target = _STATEMENTS.get(call.func.attr.value)
        if target is None or any(a.star for a in call.args):
            return updated_node
        fn, keywords = target
        given = {a.keyword.value if a.keyword is not None else None for a in call.args}
        if given - set(keywords):  # an argument torch's function has no place for: keep the runtime call
            return updated_node
        args = [a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for a in call.args]
        inner = cst.Call(func=cst.parse_expression(f"{self.names['T']}.accelerator.{fn}"), args=args)
        body = cst.IndentedBlock(body=[updated_node.with_changes(body=[cst.Expr(inner)], leading_lines=[])])
        return cst.If(test=self._expr(_AVAILABLE), body=body, leading_lines=updated_node.leading_lines)


def _hoisted(module: cst.Module, value: str) -> str | None:
    """The name of a module-level ``NAME = <value>`` line (what an earlier ``--emit torch`` wrote), or None."""
    for stmt in module.body:
        if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
                and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name)
                and _code(stmt.body[0].value) == value):
            return stmt.body[0].targets[0].target.value
    return None


def lower(module: cst.Module, torch: str, dist: str | None = None) -> tuple[cst.Module, bool]:
    """Rewrite the torchport spellings torch core has (see the module docstring) in a fixed module.

    Args:
        module: the module after the fixes (its ``torchport`` references are the fixes' own).
        torch: the local name of the ``torch`` module.
        dist: the local name of ``torch.distributed`` when the file imports it (default ``torch.distributed``).

    Returns:
        ``(module, still_uses_torchport)``; the module has the hoisted device line when a fix needed it.
    """
    value = f'{torch}.accelerator.current_accelerator(check_available=True) or {torch}.device("cpu")'
    device = _hoisted(module, value)   # a file fixed before keeps its one device line
    hoist = device is None
    if device is None:
        taken = {n for n, c in count_names(module, set(DEVICE_NAMES)).items() if c}
        device = next((n for n in DEVICE_NAMES if n not in taken), None)
    if device is None:  # pragma: no cover - all three names in use: keep the runtime
        return module, True
    lowering = _Lower(torch, dist or f"{torch}.distributed", device)
    new = module.visit(lowering)
    if lowering.used_device and hoist:
        line = cst.parse_statement(f"{device} = {value}\n").with_changes(leading_lines=[cst.EmptyLine()])
        bound = binding_statement(new, torch)   # after `import torch`, even one inside a `try:`
        new = insert_after_imports(new, [line], not_before=0 if bound is None else bound + 1)
        body = list(new.body)
        at = next(i for i, stmt in enumerate(body) if stmt is line) + 1
        if at < len(body) and not body[at].leading_lines:  # a blank line between it and the code
            body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine()])
            new = new.with_changes(body=body)
    return new, count_names(new, {"torchport"})["torchport"] > 0
