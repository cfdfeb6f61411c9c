"""Property-based robustness (hypothesis): on generated CUDA-heavy code and on installed real
code (torch / torchvision sources), scanning never crashes and fixing (unsafe fixes
included) always yields code that parses, is a fixed point, and leaves nothing fixable."""

from __future__ import annotations

import ast
import os
import pathlib
import random
import time

import pytest
import torch
import torchvision
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from torchport.migrate import catalog
from torchport.migrate.engine import analyze

RULES = catalog.ruleset(["ALL"])  # TP9xx too: every fix gets exercised

IMPORTS = [
    "import torch", "import torch as t", "from torch import cuda", "import torch.cuda as tc",
    "from torch.cuda.amp import autocast, GradScaler", "from torch.cuda import amp",
    "import torch.distributed as dist", "from torch.utils.data import DataLoader",
    "from torch.nn.parallel import DistributedDataParallel as DDP", "import torch.nn as nn", "import os",
    "import torch_npu", "from torch_npu.contrib import transfer_to_npu",
]
NAMES = st.sampled_from(["x", "model", "batch", "cuda", "device", "self.net", "t", "rank", "local_rank", "self.gpu_id"])
LEAVES = st.one_of(
    NAMES,
    st.sampled_from([
        '"cuda"', '"cuda:0"', "'cuda:1'", '"cpu"', '"nccl"', 'f"cuda:{rank}"', "0", "True", "None",
        "torch.cuda.is_available()", "t.cuda.device_count()", "cuda.current_device()", "tc.synchronize()",
        "torch.cuda.max_memory_allocated()", "torch.cuda.FloatTensor", "torch.backends.cudnn.benchmark",
        'os.environ["CUDA_VISIBLE_DEVICES"]', "torch.cuda.Stream()", "amp.autocast()", "autocast()",
        "GradScaler()", "torch.amp.GradScaler()", 'torch.autocast("cuda")', "torch.cuda.nvtx.range_pop()",
        # integer device indices and the single-backend dialects (TP109, TP6xx)
        'int(os.environ["LOCAL_RANK"])', '"cuda:{}".format(rank)', '"cuda:%d" % rank', '"npu:0"', "'mps'",
        'f"npu:{local_rank}"', '"hccl"', "torch.npu.synchronize()", "torch_npu.npu.set_compile_mode(jit_compile=False)",
        "torch.npu.amp.autocast()", "torch.backends.mps.is_available()", "torch.xpu.device_count()",
        '"npu:{}".format(rank)', "torch_npu.npu_format_cast(x, 2)",
    ]),
)


TEMPLATES = [
    "{}.cuda()", "{}.cuda({})", "{}.cuda(non_blocking=True)", "{}.to({})", "{}.to(device={}, non_blocking=True)",
    "torch.device({})", "torch.zeros(2, device={})", "({} if {} else {})", "({} == {})", "{}.is_cuda",
    "torch.load({}, map_location={})", "dist.init_process_group({})", "DDP({}, device_ids=[{}])",
    "DataLoader({}, pin_memory=True)", "nn.DataParallel({})", "{}.type(torch.cuda.HalfTensor)",
    'f"{{{}}} MiB"', "[{}, {}]", "{{'k': {}}}", "print({})", "{}.npu()", "{}.npu({})", "{}.xpu()",
]


@st.composite
def expressions(draw, depth: int = 3) -> str:
    """A CUDA-flavoured expression: a leaf, or a template filled with sub-expressions."""
    if depth == 0 or draw(st.booleans()):
        return draw(LEAVES)
    template = draw(st.sampled_from(TEMPLATES))
    return template.format(*(draw(expressions(depth - 1)) for _ in range(template.count("{}"))))


EXPRS = expressions()


def _statement(expr: str, name: str, kind: int) -> str:
    return [
        f"{name.replace('self.', '')} = {expr}\n",
        f"if {expr}:\n    pass\n",
        f"def f({name.replace('self.', '')}=None):\n    return {expr}\n",
        f"with {expr}:\n    pass\n",
        f"for item in [{expr}]:  # a comment\n    print(item)\n",
        f"{expr}\n",
        f"torch.npu.config.allow_internal_format = {expr}\n",
        f"torch.backends.cudnn.benchmark = {expr}\n",
    ][kind]


MODULES = st.builds(
    lambda imports, stmts: "\n".join(imports) + "\n\n" + "".join(stmts),
    st.lists(st.sampled_from(IMPORTS), max_size=6, unique=True),
    st.lists(st.builds(_statement, EXPRS, NAMES, st.integers(0, 7)), min_size=1, max_size=6),
)


def check_roundtrip(source: str, path: str = "<generated>") -> None:
    first = analyze(source, path, RULES, fix=True, unsafe=True)
    assert first.error is None, first.error
    fixed = first.fixed_source if first.fixed_source is not None else source
    ast.parse(fixed)
    second = analyze(fixed, path, RULES, fix=True, unsafe=True)
    assert second.error is None, second.error
    assert second.fixed_source is None or second.fixed_source == fixed, "fixing twice differs from fixing once"
    assert [f for f in second.findings if f.fixable] == [], [(f.line, f.code) for f in second.findings]


def _valid(source: str) -> bool:
    try:  # the templates can compose code this Python rejects (`0.cuda()`, nested quotes)
        ast.parse(source)
        return True
    except SyntaxError:
        return False


VALID_MODULES = MODULES.filter(_valid)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(VALID_MODULES)
def test_generated_code(source):
    check_roundtrip(source)


def _real_files() -> list[pathlib.Path]:
    roots = [pathlib.Path(torchvision.__file__).parent, pathlib.Path(torch.__file__).parent]
    out = []
    for root in roots:
        for p in sorted(root.rglob("*.py")):
            if p.stat().st_size < 40_000 and RULES.prefilter.search(p.read_text(encoding="utf-8", errors="replace")):
                out.append(p)
    return out


REAL = _real_files()
#: A different sample of real files every run (the seed is printed; TORCHPORT_HYPOTHESIS_SEED=N replays it),
#: within a fixed time budget (TORCHPORT_HYPOTHESIS_BUDGET_S, default 30 s): examples past it pass untried.
REAL_SEED = int(os.environ.get("TORCHPORT_HYPOTHESIS_SEED") or random.SystemRandom().randrange(2**32))
REAL_BUDGET_S = float(os.environ.get("TORCHPORT_HYPOTHESIS_BUDGET_S") or 30)
_real_started: list[float] = []


def test_real_files_were_found():
    """torch and torchvision are installed with this package: no sources to sample is a bug, not a skip."""
    assert len(REAL) >= 20, f"only {len(REAL)} real files with device code under torch/torchvision"


@seed(REAL_SEED)
@settings(max_examples=12, deadline=None, derandomize=False, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL or [pathlib.Path(__file__)]))
def test_installed_real_code(path):
    if not _real_started:
        _real_started.append(time.monotonic())
        print(f"hypothesis seed {REAL_SEED} (replay: TORCHPORT_HYPOTHESIS_SEED={REAL_SEED})")
    if time.monotonic() - _real_started[0] > REAL_BUDGET_S:
        return
    note(f"file: {path}; replay: TORCHPORT_HYPOTHESIS_SEED={REAL_SEED} pytest {__file__}::test_installed_real_code")
    check_roundtrip(path.read_text(encoding="utf-8"), str(path))
