"""What the rules report, judged in context once every rule has run: code that already handles other backends.

A rule sees one construct; whether it is CUDA-only often shows only in what surrounds it. After the walk,
:func:`judge` looks at each finding's ancestors and

* **drops** it when the code already branches per backend -- an ``if``/``elif`` chain whose tests name CUDA
  and the npu (``if self.is_cuda: ... elif self.is_npu: ...``, ``if d == "cuda": ... elif d == "npu": ...``),
  neighbouring statements that do the same (``is_cuda = ...`` next to ``is_npu = ...``), a dict keyed by
  device types that has an npu entry (``{"cuda": "nccl", "npu": "hccl"}``), or an ``if``/``else`` on the
  collective backend (``if dist.get_backend() == "nccl": ... else: ...``: the ``else`` serves the others);
  when the value is only written to a log (``logger.info(f"{torch.backends.cudnn.allow_tf32=}")``); and for
  device names in files that drive caffe2 (a runtime with CUDA and CPU devices only); for an availability
  assert that states a CUDA-only library's requirement (``assert torch.cuda.is_available(), "... APEX ..."``); and
  for ``DistributedDataParallel(m, device_ids=device_ids)`` passing on the enclosing function's parameter;
* **keeps without a fix** a device test (``if not x.is_cuda:``, ``x.device.type == "cuda"``) whose ``if``
  leads to a compiled CUDA-only kernel (``_C.op(...)``, ``torch.ops.ns.op(...)``): the rewrite would send an
  npu tensor into that kernel -- a silent wrong result or a crash -- so the finding says so and stays as it is.

``tools/scan_labels.py`` measures what this buys on pinned repositories (docs/scan_accuracy.md).
"""

from __future__ import annotations

import dataclasses
import re

import libcst as cst

from torchport.migrate.positions import positions
from torchport.migrate.walk import _ORDER, _TOKEN_TYPES, _child_fields

__all__ = ["judge"]

_BLANK = cst.Module(body=[])
_WORDS = re.compile(r"(?<![A-Za-z])(cuda|npu|nccl|hccl)(?![A-Za-z])", re.I)
_LOG = re.compile(r"^(print|(\w+\.)*(log|logger|_logger|logging|LOGGER)\.\w+|warnings\.warn|(\w+\.)*(info|debug|warning))$")
_KERNEL = re.compile(r"\b_C\.\w+\(|torch\.ops\.\w+\.\w+\(|\b\w+_cuda\.\w+\(|\b\w*_ext\.\w+\(")
_CUDA_LIBS = re.compile(r"apex|bitsandbytes|flash.?attn|xformers|transformer.?engine|cupy|nvml", re.I)
_CAFFE2 = re.compile(r"^\s*(?:from|import)\s+caffe2\b", re.M)
#: rules whose finding is about a device name or a device test (what a per-backend chain makes moot)
_DEVICE_RULES = ("TP1", "TP3", "TP6")


def _code(node: cst.CSTNode) -> str:
    return _BLANK.code_for_node(node)


def _backends(node: cst.CSTNode | None) -> set[str]:
    """The backends a test or statement names: ``cuda`` (also ``nccl``), ``npu`` (also ``hccl``)."""
    if node is None:
        return set()
    found = {w.lower() for w in _WORDS.findall(_code(node))}
    return {"cuda" if w in ("cuda", "nccl") else "npu" for w in found}


def _stmt_backends(stmt: cst.CSTNode) -> set[str]:
    """The backends a per-backend statement names: an ``if`` test, or ``is_cuda = ...`` / ``self.use_npu = ...``
    (an assignment whose target names a backend); empty for any other statement."""
    if isinstance(stmt, cst.If):
        return _backends(stmt.test)
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        assign = stmt.body[0]
        if len(assign.targets) == 1 and _backends(assign.targets[0].target):
            return _backends(assign.targets[0].target) | _backends(assign.value)
    return set()


def _parents(module: cst.Module, wanted: set[int]) -> dict[int, list[cst.CSTNode]]:
    """For each wanted node (by id), its ancestors, nearest first (one walk without node rebuilding, stopped
    once every wanted node is found; whitespace and operator tokens are not entered)."""
    out: dict[int, list[cst.CSTNode]] = {}
    path: list[cst.CSTNode] = []
    order = _ORDER

    def rec(node: cst.CSTNode) -> bool:
        if id(node) in wanted:
            out[id(node)] = path[::-1]
            if len(out) == len(wanted):
                return True
        path.append(node)
        t = type(node)
        fields = order.get(t)
        for name in fields if fields is not None else _child_fields(t):
            child = getattr(node, name)
            kids = child if type(child) in (list, tuple) else (child,)
            for c in kids:
                if isinstance(c, cst.CSTNode) and type(c) not in _TOKEN_TYPES and rec(c):
                    return True
        path.pop()
        return False

    rec(module)
    return out


def _chain(top: cst.If) -> tuple[list[tuple[cst.BaseExpression, cst.BaseSuite]], cst.Else | None]:
    branches, node = [], top
    while True:
        branches.append((node.test, node.body))
        nxt = node.orelse
        if isinstance(nxt, cst.If):
            node = nxt
            continue
        return branches, nxt


def _in(node: cst.CSTNode, part: cst.CSTNode, ancestors: list[cst.CSTNode]) -> bool:
    return node is part or any(a is part for a in ancestors)


def _per_backend(node: cst.CSTNode, ancestors: list[cst.CSTNode], code: str) -> bool:
    """True when ``node`` sits in code that already branches per backend (see the module docstring)."""
    for i, a in enumerate(ancestors):
        if isinstance(a, cst.If) and not (i + 1 < len(ancestors) and isinstance(ancestors[i + 1], cst.If)
                                          and ancestors[i + 1].orelse is a):
            branches, orelse = _chain(a)
            named = [(_backends(t), t, b) for t, b in branches]
            union = set().union(*(n for n, _, _ in named))
            nccl_else = orelse is not None and any("nccl" in _code(t).lower() for _, t, _ in named)
            if {"cuda", "npu"} <= union or nccl_else:
                for names, test, body in named:
                    if names and (_in(node, test, ancestors) or _in(node, body, ancestors)):
                        return True
        if isinstance(a, cst.Dict):
            keys = {e.key.evaluated_value for e in a.elements
                    if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)}
            if "cuda" in keys and "npu" in keys:
                return True
        if isinstance(a, (cst.SimpleStatementLine, cst.If)) and i + 1 < len(ancestors):
            block = ancestors[i + 1]
            body = getattr(block, "body", None)
            if isinstance(body, (list, tuple)) and a in body:
                k = body.index(a)
                mine = _stmt_backends(a)
                if len(mine) == 1:
                    for j in (k - 1, k + 1):
                        if 0 <= j < len(body) and isinstance(body[j], (cst.SimpleStatementLine, cst.If)):
                            other = body[j]
                            theirs = _stmt_backends(other)
                            if len(theirs) == 1 and theirs != mine:
                                return True
    return False


def _logged(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> bool:
    """True when ``node`` is a value (no call of its own) read only to be written to a log or printed."""
    if isinstance(node, cst.Call):
        return False
    for a in ancestors:
        if isinstance(a, cst.Call):
            return bool(_LOG.match(_code(a.func)))
        if isinstance(a, cst.BaseSmallStatement) or isinstance(a, cst.BaseCompoundStatement):
            return False
    return False


def _cuda_library_guard(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> bool:
    """``assert torch.cuda.is_available(), "CUDA required for APEX optimizers"``: a library that exists for CUDA
    only is refused elsewhere -- the right answer on an npu."""
    for a in ancestors:
        if isinstance(a, cst.Assert):
            return a.msg is not None and _CUDA_LIBS.search(_code(a.msg)) is not None
        if isinstance(a, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _passed_through(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> bool:
    """``DDP(m, device_ids=device_ids)`` in ``def wrap(self, device_ids=None)``: the caller's value, not CUDA's."""
    if not isinstance(node, cst.Call):
        return False
    values = [a.value for a in node.args if a.keyword is not None and a.keyword.value in ("device_ids", "output_device")]
    fn = next((a for a in ancestors if isinstance(a, cst.FunctionDef)), None)
    if not values or fn is None:
        return False
    params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    return all(isinstance(v, cst.Name) and v.value in params for v in values)


def judge(ctx, module: cst.Module, *, sliced_pass: bool = False) -> None:
    """Drop or downgrade ``ctx.reported`` findings by their context (module docstring)."""
    reported = [r for r in ctx.reported if r.rule.code.startswith(_DEVICE_RULES)]
    if not reported:
        return
    parents = _parents(module, {id(r.node) for r in reported})
    # a sliced walk (torchport.migrate.fast) keeps each finding's frames, their whole if-chains and their
    # neighbouring `if` / assignment statements: what the checks below read
    caffe2 = _CAFFE2.search(ctx.text) is not None
    lines = None
    keep, drop = [], set()
    for r in reported:
        ancestors = parents.get(id(r.node), [])
        if _per_backend(r.node, ancestors, r.rule.code) or _logged(r.node, ancestors) or (
                caffe2 and r.rule.code == "TP104") or (
                r.rule.code == "TP110" and _cuda_library_guard(r.node, ancestors)) or (
                r.rule.code == "TP302" and _passed_through(r.node, ancestors)):
            drop.add(id(r))
            continue
        if r.fix is not None and r.rule.code in ("TP104", "TP105"):
            guard = next((a for i, a in enumerate(ancestors) if isinstance(a, cst.If)
                          and _in(r.node, a.test, ancestors[:i])), None)
            if guard is not None:
                if sliced_pass:   # the block's end: a blanked last statement ends it early in a sliced walk
                    ctx.whole_file_used = True
                    return
                if lines is None:
                    lines = ctx.text.splitlines()
                # the kernel is in a branch, or after it (`if not x.is_cuda: raise ...` guards what follows);
                # the text is read from the whole file (a sliced pass blanks statements no rule fires in)
                block = next((a for a in ancestors if isinstance(a, cst.IndentedBlock)), None)
                span = block if block is not None else guard
                where = positions(module, [guard, span])
                start, end = where[guard][0], where[span][2]
                m = _KERNEL.search("\n".join(lines[start - 1:end]))
                if m is not None:
                    kernel = m.group(0).rstrip("(")
                    keep.append((r, dataclasses.replace(
                        r, fix=None, safety="none",
                        message=f"{r.message.split(';')[0]}; not rewritten: this test picks the compiled CUDA-only "
                                f"kernel `{kernel}`, which another device's tensors must not reach -- give that "
                                "device a kernel or a portable path by hand")))
    swap = {id(old): new for old, new in keep}
    ctx.reported = [swap.get(id(r), r) for r in ctx.reported if id(r) not in drop]
