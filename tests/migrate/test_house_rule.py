"""Plain-text guard for the house rule: no device names outside backends/emulate/shim/migrate.

A grep, independent of the scanner (mirrors rule 1 of ``/work/shared/hooks/before-stop``):
it catches what an AST-based scan cannot, e.g. device names inside strings and comments.
"""

from __future__ import annotations

import re

from migrate_helpers import REPO

PATTERN = re.compile(r"""torch\.cuda|\.cuda\(|torch\.npu|\.npu\(|torch_npu|"cuda|'cuda|"npu|'npu|"nccl"|"hccl"|"""
                     r""""xpu|'xpu|"mps|'mps|"gloo"|'gloo'|"xccl"|ASCEND_|"cann"|'cann'|"""
                     # a hand-written backend list in prose or help text (generate it from the registry)
                     r"""\b(?:npu|cuda|xpu|mps|nccl|hccl|gloo|xccl)\b\s*[|>/,]\s*\b(?:npu|cuda|xpu|mps|cpu|nccl|hccl|gloo|xccl)\b""")
EXEMPT = ("backends", "emulate", "shim", "migrate")


def violations() -> list[str]:
    """``file:line: text`` for every device name outside the exempt packages."""
    root = REPO / "src" / "torchport"
    hits = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in EXEMPT:
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PATTERN.search(line):
                hits.append(f"{path.relative_to(REPO)}:{no}: {line.strip()}")
    return hits


def test_pattern_matches_what_it_guards():
    for bad in ('x.cuda()', 'torch.cuda.synchronize()', 'd = "cuda:0"', "b = 'npu'", 'be = "nccl"', "import torch_npu",
                'if be == "gloo":', 'd = "xpu:1"', "t = 'mps'", 'os.environ["ASCEND_HOME_PATH"]', 'help="auto | npu | cuda"',
                "order npu > cuda > cpu", "(nccl / hccl / gloo)"):
        assert PATTERN.search(bad), bad
    for fine in ("target.module.synchronize()", 'kind = target.type', "backend.dist_backend", 'f"cannot decode"',
                 "on an Ascend NPU", "dist.Backend.GLOO"):
        assert not PATTERN.search(fine), fine


def test_no_device_names_outside_the_device_layers():
    hits = violations()
    assert not hits, "device names outside backends/emulate/shim/migrate (go through the backend registry):\n" + "\n".join(hits)
