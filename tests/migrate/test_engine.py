"""Engine internals: name resolution, positions, import edits."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate_helpers import FIXTURES
from torchport.migrate import catalog, fix_source, scan_source
from torchport.migrate.context import FileContext
from torchport.migrate.engine import _Scanner
from torchport.migrate.positions import positions
from torchport.migrate.resolve import ImportTable, qualname


@pytest.mark.parametrize("imports,expr,expected", [
    ("import torch as t", "t.cuda.synchronize", "torch.cuda.synchronize"),
    ("from torch import cuda", "cuda.synchronize", "torch.cuda.synchronize"),
    ("from torch.cuda.amp import autocast", "autocast", "torch.cuda.amp.autocast"),
    ("import torch.cuda as tc", "tc.Stream", "torch.cuda.Stream"),
    ("import torch.cuda", "torch.cuda.Event", "torch.cuda.Event"),
    ("from torch.nn.parallel import DistributedDataParallel as DDP", "DDP",
     "torch.nn.parallel.DistributedDataParallel"),
    ("import torch", "torch.autocast", "torch.amp.autocast"),
    ("from numba import cuda", "cuda.synchronize", "numba.cuda.synchronize"),
    ("from . import cuda", "cuda.synchronize", "<local>.cuda.synchronize"),
    ("import os", "self.cuda", None),
])
def test_qualified_names(imports, expr, expected):
    table = ImportTable.from_module(cst.parse_module(imports + "\n"))
    assert qualname(cst.parse_expression(expr), table.aliases) == expected


def test_imports_in_blocks_count_and_function_imports_are_not_top_level():
    mod = cst.parse_module("try:\n    import torch as T\nexcept ImportError:\n    pass\n"
                           "def f():\n    from torch import cuda\n")
    table = ImportTable.from_module(mod)
    assert table.aliases["T"] == "torch" and table.aliases["cuda"] == "torch.cuda"
    assert "T" in table.top_level and "cuda" not in table.top_level


def test_positions_match_libcst_position_provider():
    rules = catalog.ruleset(["ALL"])
    checked = 0
    for case in sorted(FIXTURES.glob("*/case*.py")):
        module = cst.parse_module(case.read_text(encoding="utf-8"))
        ctx = FileContext(module, rules)
        module.visit(_Scanner(ctx))
        nodes = [r.node for r in ctx.reported]
        ours = positions(module, nodes)
        ref = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node in nodes:
            r = ref[node]
            assert ours[node] == (r.start.line, r.start.column + 1, r.end.line, r.end.column + 1), case
            checked += 1
    assert checked > 100


def test_positions_of_any_statement_match_libcst_even_when_its_end_is_a_closing_paren():
    """Spans bounded by a child that records no position itself (the `)` of `from m import (a, b)`):
    `scan --isolated` over the emulator's own files crashed with KeyError: RightParen."""
    src = ("from torch import (cuda,\n    device)\nfrom os import (path)\n"
           "with (open('a') as f, open('b') as g):\n    pass\n"
           "def f():\n    return (cuda.is_available())\n"
           "import torch; from torch.cuda import (synchronize)\n")
    module = cst.parse_module(src)
    nodes = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node):
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine)):
                nodes.append(node)
            return True

    module.visit(Collect())
    ours = positions(module, nodes)
    ref = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert len(nodes) >= 10
    for node in nodes:
        r = ref[node]
        assert ours[node] == (r.start.line, r.start.column + 1, r.end.line, r.end.column + 1), type(node).__name__


@pytest.mark.parametrize("src,expected", [
    ("x = x.cuda()\n", "import torchport\n\nx = x.to(torchport.device())\n"),
    ('"""Doc."""\nx = x.cuda()\n', '"""Doc."""\nimport torchport\nx = x.to(torchport.device())\n'),
    ("from __future__ import annotations\nimport os\n\nx = x.cuda()\n",
     "from __future__ import annotations\nimport os\nimport torchport\n\nx = x.to(torchport.device())\n"),
    # a comment heading the file (licence, shebang) stays above the new import
    ("# a comment about x\nx = x.cuda()\n", "# a comment about x\nimport torchport\n\nx = x.to(torchport.device())\n"),
    ("import torchport as tp\nx = x.cuda()\n", "import torchport as tp\nx = x.to(tp.device())\n"),
    ("import torch as t\nt.cuda.synchronize()\ny = t.zeros(1)\n",
     "import torch as t\nimport torchport\nt.cuda.synchronize()\ny = t.zeros(1)\n".replace(
         "t.cuda.synchronize()", "torchport.synchronize()")),
])
def test_import_is_added_once_in_the_right_place(src, expected):
    assert fix_source(src) == expected


def test_unused_imports_go_only_when_a_fix_emptied_them():
    src = "import os\nimport torch\nfrom torch.cuda.amp import GradScaler, autocast\n\nscaler = GradScaler()\n"
    out = fix_source(src)
    assert "import os\n" in out  # unused before the fix: not ours to remove
    assert "from torch.cuda.amp import autocast\n" in out  # unused before the fix too
    assert "GradScaler()" not in out.replace("torch.amp.GradScaler(", "")


def test_local_shadowing_and_unrelated_cuda_attributes():
    src = ("import torch\nfrom torch import cuda\n\n"
           "def f(cuda):\n    return cuda.synchronize()\n\n"
           "def g():\n    cuda = make()\n    cuda.synchronize()\n\n"
           "cuda.synchronize()\n")
    assert [(f.line, f.code) for f in scan_source(src).findings] == [(11, "TP113")]


def test_syntax_error_becomes_a_file_error():
    res = scan_source("x = x.cuda(\n")
    assert res.findings == [] and res.error is not None and "not valid Python" in res.error.message
    with pytest.raises(ValueError, match="not valid Python"):
        fix_source("x = x.cuda(\n")


def test_a_tokenizer_error_names_its_own_line():
    """LibCST's tokenizer errors all say line 1; the error names the line Python's parser finds."""
    res = scan_source("import torch\n\n# help syntax pasted from IPython\ntorch.*Tensor?\nx = torch.ones(2).cuda()\n")
    assert "tokenizer error" in res.error.message and res.error.line == 4, res.error
    assert scan_source("x = x.cuda(\n").error.line == 1   # a parser error keeps LibCST's own line
