"""Line/column positions for the few nodes that have findings.

LibCST's ``PositionProvider`` records a range for every node of the module; resolving it
measured ~8x the cost of this module's approach on torch's sources: one code-generation
pass that only remembers the token spans of the target nodes, then maps token offsets
to lines. The numbers are identical to PositionProvider's (checked in the tests).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import re
from typing import Iterable

import libcst as cst
from libcst._nodes.internal import CodegenState  # stable across libcst 1.x; used for positions only

__all__ = ["positions"]


@dataclasses.dataclass(frozen=False)
class _SpanState(CodegenState):
    """Codegen that remembers token spans of a few target nodes (nothing else is recorded)."""

    targets: frozenset = frozenset()
    spans: dict = dataclasses.field(default_factory=dict)
    #: children whose span bounds a target's (a compound statement ends where its body's last statement does)
    bounds: set = dataclasses.field(default_factory=set)
    starts: dict = dataclasses.field(default_factory=dict)

    # A bound that records no syntactic position itself (a closing paren) spans its own tokens, as
    # PositionProvider's before/after_codegen give every node a range.
    def before_codegen(self, node) -> None:
        if node in self.bounds:
            self.starts[node] = len(self.tokens)

    def after_codegen(self, node) -> None:
        if node in self.bounds and node not in self.spans:
            self.spans[node] = (self.starts.pop(node, len(self.tokens)), len(self.tokens))

    @contextlib.contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        if node in self.targets or node in self.bounds:
            self.bounds.update(n for n in (start_node, end_node) if n is not None)
            first = len(self.tokens)
            yield
            self.spans[node] = (self.spans[start_node][0] if start_node is not None else first,
                                self.spans[end_node][1] if end_node is not None else len(self.tokens))
        else:
            yield


_NEWLINE = re.compile(r"\r\n?|\n")


def positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, tuple[int, int, int, int]]:
    """1-based (line, column, end_line, end_column) of ``nodes``, as LibCST's PositionProvider
    computes them, from one code-generation pass that tracks only these nodes (several
    times cheaper than resolving PositionProvider for every node of the module)."""
    state = _SpanState(default_indent=module.default_indent, default_newline=module.default_newline,
                       targets=frozenset(nodes))
    module._codegen(state)
    tokens = state.tokens
    wanted = sorted({i for span in state.spans.values() for i in span})
    offsets: dict[int, int] = {}
    acc, k = 0, 0
    for idx in wanted:
        while k < idx:
            acc += len(tokens[k])
            k += 1
        offsets[idx] = acc
    code = "".join(tokens)
    starts = [0] + [m.end() for m in _NEWLINE.finditer(code)]

    def where(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    out = {}
    for node, (a, b) in state.spans.items():
        if node in state.targets:
            out[node] = (*where(offsets[a]), *where(offsets[b]))
    return out
