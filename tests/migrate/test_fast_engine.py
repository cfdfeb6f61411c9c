"""The fast scan (``ast`` marks, LibCST walks only marked statements) finds exactly what the full pass finds.

The reference is the full LibCST pass with the text prefilter switched off (every file walked whole), so these
tests also prove that each rule's declared needles and hooks cover what it reports: a rule added with a
fixture but without the needle (or the hook declaration) its detection needs fails here.

* every fixture file, with every rule selected (TP9xx included);
* a corpus of real code: the installed timm and accelerate packages and a deterministic sample of torch's own
  sources (:data:`TORCH_FILES`; 486 files with timm 1.0.31 and accelerate 1.16), the full pass with the same
  prefilter as reference (cheaper; ``benchmarks/bench_scan.py --compare`` runs the corpus with it off);
* the slicing is real: on that corpus most analysed lines never reach LibCST, and both paths of the fallback
  (a rule asking for a binding a blanked statement makes, a rule reading the whole module) are exercised.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path

import pytest

from migrate_helpers import FIXTURES
from torchport.migrate import catalog, engine, fast

ALL = catalog.ruleset(["ALL"])
DEFAULT = catalog.ruleset()
#: torch's own files in the real-code corpus (every k-th), beside the whole of timm and accelerate
TORCH_FILES = 60  # with every 2nd timm file and all of accelerate: ~290 real files, half the old time


def _unfiltered(rs):
    """The same rules with the text prefilter matching every file: the full pass walks everything."""
    rs = copy.copy(rs)
    rs.prefilter = re.compile("")
    return rs


def _same(text: str, path: str, rs) -> tuple[list, list]:
    full = engine.analyze(text, path, _unfiltered(rs))
    quick = fast.scan(text, path, rs)
    return ([f.to_dict() for f in full.findings], full.error), ([f.to_dict() for f in quick.findings], quick.error)


def _fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.py"))


@pytest.mark.parametrize("rs", [ALL, DEFAULT], ids=["all-rules", "default-rules"])
def test_every_fixture_same_findings(rs):
    files = _fixture_files()
    assert len(files) > 100
    differ = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        full, quick = _same(text, str(path.relative_to(FIXTURES)), rs)
        if full != quick:
            differ.append(str(path.relative_to(FIXTURES)))
    assert not differ, f"fast scan differs from the full pass on {differ}"


def _corpus() -> list[Path]:
    out: list[Path] = []
    for pkg, step in (("timm", 2), ("accelerate", 1), ("torch", None)):
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.origin, f"{pkg} is a dev dependency; it must be installed"
        files = sorted(Path(spec.origin).parent.rglob("*.py"))
        if step is None:
            files = files[::max(1, len(files) // TORCH_FILES)][:TORCH_FILES]
        else:
            files = files[::step]
        out += files
    return out


def test_real_code_same_findings_and_sliced():
    files = _corpus()
    assert len(files) >= 250
    differ, kept, total, fallbacks, rounds = [], 0, 0, 0, 0
    orig = engine.analyze
    calls: list[str] = []

    def counting(*a, **k):
        calls.append("sliced" if k.get("sliced") else "full")
        return orig(*a, **k)

    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        full = engine.analyze(text, str(path), DEFAULT)   # prefilter on: the fixtures prove it a superset
        calls.clear()
        engine.analyze = counting
        try:
            quick = fast.scan(text, str(path), DEFAULT)
        finally:
            engine.analyze = orig
        if full.findings != quick.findings or full.error != quick.error:
            differ.append(str(path))
        if calls:
            rounds += calls.count("sliced") > 1
            fallbacks += "full" in calls
            total += text.count("\n")
            if "full" not in calls and DEFAULT.prefilter.search(text):
                import ast

                tree = ast.parse(text)
                found = fast.triggers(tree, DEFAULT)
                sliced = fast.slice_source(text, tree, found.keep) or text
                kept += sum(1 for ln in sliced.splitlines() if ln.strip() not in ("", "pass"))
    assert not differ, f"fast scan differs from the full pass on {len(differ)} file(s): {differ[:5]}"
    assert fallbacks > 0, "the corpus no longer exercises the whole-file fallback: pick other files"
    assert kept < 0.8 * total, f"slicing keeps {kept} of {total} lines: it no longer saves LibCST work"


def test_a_marker_that_misses_a_hook_is_caught(monkeypatch):
    """Seeded defect: a marker blind to method hooks drops `.cuda()` -- the comparison must tell."""
    text = "import torch\n\nx = torch.zeros(2)\ny = x.cuda()\n"
    assert _same(text, "t.py", DEFAULT)[0] == _same(text, "t.py", DEFAULT)[1]
    blind = fast._Marker.__init__

    def init(self, rs, aliases):
        blind(self, rs, aliases)
        self.methods, self.marking_methods = {}, frozenset()

    monkeypatch.setattr(fast._Marker, "__init__", init)
    full, quick = _same(text, "t.py", DEFAULT)
    assert [f["code"] for f in full[0]] == ["TP101"] and quick[0] == []


def test_blanked_statements_keep_every_line_number():
    text = ("import torch\n\n\ndef f(a,\n      b):\n    '''doc'''\n    return a + b  # no device here\n\n"
            "@decorator\nclass C:\n    x = 1\n\nz = torch.zeros(1).cuda()  # noqa: TP999\n")
    import ast

    tree = ast.parse(text)
    found = fast.triggers(tree, DEFAULT)
    sliced = fast.slice_source(text, tree, found.keep)
    assert sliced is not None and sliced.count("\n") == text.count("\n")
    assert sliced.splitlines()[12] == text.splitlines()[12]
    assert "def f" not in sliced and "class C" not in sliced
    ast.parse(sliced)


def test_a_binding_in_a_blanked_statement_is_kept_in_a_second_round(monkeypatch):
    # `.to(gpu)`: TP109 follows gpu -> base; base's binding sits in setup(), blanked in the first round
    text = ("import os\nimport torch\n\ndef setup():\n    global base\n    base = int(os.environ['LOCAL_RANK'])\n\n"
            "gpu = base\n\ndef h(m):\n    return m.to(gpu)\n")
    full, quick = _same(text, "t.py", DEFAULT)
    assert [f["code"] for f in full[0]] == ["TP109"] and full == quick
    calls = []
    orig = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda *a, **k: calls.append(bool(k.get("sliced"))) or orig(*a, **k))
    fast.scan(text, "t.py", DEFAULT)
    assert calls == [True, True], calls     # two sliced rounds, no full pass


def test_a_rule_reading_the_whole_module_gets_the_full_pass(monkeypatch):
    # TP210's fix plan walks the whole file (apex keeps one global state: every amp call moves together)
    text = ("import torch\nfrom apex import amp\n\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n\n"
            "def step(loss):\n    with amp.scale_loss(loss, opt) as s:\n        s.backward()\n")
    full, quick = _same(text, "t.py", DEFAULT)
    assert full == quick and full[0]
    calls = []
    orig = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda *a, **k: calls.append(bool(k.get("sliced"))) or orig(*a, **k))
    fast.scan(text, "t.py", DEFAULT)
    assert calls[-1] is False, calls


def test_int_device_index_needles_cover_every_index_name():
    """TP109 fires on names the context calls device indices: its needles must cover each of them."""
    from torchport.migrate.context import DEVICE_INDEX_LISTS, DEVICE_INDEX_NAMES

    rule = catalog.get("TP109")
    missing = [n for n in DEVICE_INDEX_NAMES | DEVICE_INDEX_LISTS if not any(t in n for t in rule.needles)]
    assert not missing, f"TP109's needles miss {missing}: add a needle that each contains"


def test_common_torch_code_never_reaches_libcst(monkeypatch):
    """The marks are tight enough that everyday torch code (strings holding "npu" as in "input", conditional
    expressions, `import torch`, factories and `.to` without an integer device) costs no LibCST pass, while an
    integer device bound in the file still does (and is found as by the full pass)."""
    plain = ('import torch\nimport torch.nn as nn\n\n\n# runs on cuda and on the npu\nclass M(nn.Module):\n    """Forward the input."""\n\n'
             '    def forward(self, x, device=None):\n        dev = x.device\n        y = torch.zeros(2, device=dev, '
             'dtype=x.dtype if x.is_floating_point() else None)\n        return x.to(dev), y.to(x.dtype), '
             '"input_size"\n')
    local = ('import os\nimport torch\n\nlocal = int(os.environ["LOCAL_RANK"])\nd = local\n'
             'x = torch.zeros(2, device=d)\n')
    calls: list[str] = []
    orig = engine.analyze

    def counting(*a, **k):
        calls.append("x")
        return orig(*a, **k)

    assert DEFAULT.prefilter.search(plain) is not None    # the marks, not the prefilter, decide
    monkeypatch.setattr(engine, "analyze", counting)
    assert fast.scan(plain, "plain.py", DEFAULT).findings == [] and calls == []
    found = fast.scan(local, "local.py", DEFAULT)
    assert calls and [f.code for f in found.findings] == ["TP109"]
    monkeypatch.setattr(engine, "analyze", orig)
    assert _same(local, "local.py", DEFAULT)[0] == _same(local, "local.py", DEFAULT)[1]


@pytest.mark.parametrize("src", [
    "import torch\nimport torch.distributed as dist\nr = dist.get_rank()\nmodel = torch.nn.Linear(2, 2)\nmodel.to(r)\n",
    "import torch\nfrom torch.distributed import get_local_rank\nlr = get_local_rank()\nx = torch.ones(3, device=lr)\n",
    "import torch\nimport torch.distributed as dist\n\n\nclass T:\n    def __init__(self):\n        self.dev = dist.get_rank()\n"
    "        self.m = torch.nn.Linear(2, 2).to(self.dev)\n",
    "import torch\n\n\ndef main(args):\n    x = torch.zeros(2, device=args.gpu)\n",
    "import torch\n\n\ndef run(rank):\n    torch.ones(1).to(rank)\n",
    "import torch\nfor i in range(torch.cuda.device_count()):\n    torch.zeros(1, device=i)\n",
])
def test_the_int_device_gate_lets_every_int_device_form_through(src):
    """The fast engine's gate for TP109 mirrors ``FileContext.int_device`` by hand: every form that the full pass
    calls an integer device index (a rank from torch.distributed under any alias, a parameter or attribute named
    as an index, a loop over the device count, ``int(...) % n``) must still reach LibCST and be found."""
    (full, full_error), (quick, quick_error) = _same(src, "gate.py", DEFAULT)
    assert "TP109" in [f["code"] for f in full] and (quick, quick_error) == (full, full_error)


def test_per_backend_context_survives_the_slicing(monkeypatch):
    """What ``handled.judge`` reads around a finding stays in the sliced module: the whole if-chain (a finding
    in the ``if`` branch of an ``if ... elif self.is_npu:`` chain is judged in the one sliced pass, no second
    full pass) and the neighbouring statements (``use_npu = False`` beside ``is_cuda = ...`` holds no mark, yet
    it makes the finding moot -- blanked, the fast scan reported TP110 where the full pass reports nothing)."""
    chain = ("import torch\n\n\ndef pick(self, x):\n    y = 1\n    if self.is_cuda:\n        y = x.cuda()\n"
             "    elif self.is_npu:\n        y = x.to(self.dev)\n    return y\n")
    module = "import torch\n\nuse_npu = False\nis_cuda = torch.cuda.is_available()\n"
    local = "import torch\n\n\ndef pick(x):\n    use_npu = False\n    is_cuda = torch.cuda.is_available()\n    return x\n"
    alone = "import torch\n\nis_cuda = torch.cuda.is_available()\n"
    assert [f.code for f in fast.scan(alone, "t.py", DEFAULT).findings] == ["TP110"]   # the neighbour decides
    for text in (chain, module, local):
        full, quick = _same(text, "t.py", DEFAULT)
        assert full == quick and full[0] == [], (text, quick)
    calls = []
    orig = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda *a, **k: calls.append(bool(k.get("sliced"))) or orig(*a, **k))
    fast.scan(chain, "t.py", DEFAULT)
    assert calls == [True], calls     # one sliced pass


def test_long_line_check_matches_the_regex_it_replaced():
    """``runner._long_line`` (a line of 10,000 characters sends the file to a process of its own) answers as
    ``re.search(r"[^\\n]{10000}", text)`` did, at the boundary and with ``\\r`` inside a line."""
    from torchport.migrate import runner

    regex = re.compile(r"[^\n]{10000}")
    n = runner.LONG_LINE
    texts = ["", "x = 1\n", "a" * (n - 1), "a" * n, "b\n" + "a" * (n - 1) + "\n" + "c" * (n - 1),
             "b\n" + "a" * n + "\n", "a" * (n // 2) + "\r" + "a" * (n // 2), ("y\n" * n)]
    assert [runner._long_line(t) for t in texts] == [regex.search(t) is not None for t in texts]
    assert runner._long_line("a" * n) and not runner._long_line("a" * (n - 1))


def test_a_torch_device_annotation_costs_no_libcst_pass(monkeypatch):
    """``torch.device``'s rules act on calls only (``fast_call_gate``): an annotation or an ``isinstance`` test
    marks nothing, while a ``torch.device("cuda")`` call still reaches LibCST and is reported as by the full pass."""
    typed = ("import torch\nfrom typing import Optional\n\n\n# on cuda or the npu\ndef make(n, device: Optional[torch.device] = None) -> "
             "torch.Tensor:\n    assert device is None or isinstance(device, torch.device)\n"
             "    return torch.zeros(n, device=device)\n")
    built = typed + "\n\nDEV = torch.device('cuda')\n"
    calls = []
    orig = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda *a, **k: calls.append("x") or orig(*a, **k))
    assert DEFAULT.prefilter.search(typed) is not None     # the marks, not the prefilter, decide
    assert fast.scan(typed, "typed.py", DEFAULT).findings == [] and calls == []
    assert [f.code for f in fast.scan(built, "built.py", DEFAULT).findings] == ["TP102"] and calls
    monkeypatch.setattr(engine, "analyze", orig)
    for text in (typed, built):
        full, quick = _same(text, "t.py", DEFAULT)
        assert full == quick


@pytest.mark.parametrize("hit", [
    "from functools import partial\nimport torch\nac = partial(torch.autocast, 'cuda', dtype=torch.float16)\n",
    "import functools\nfrom torch import autocast as cast\nac = functools.partial(cast, device_type=dev.type)\n",
    "import torch\nx = torch.ones(2)\ny = x.type(torch.cuda.FloatTensor)\n",
])
def test_partials_and_attributes_mark_only_what_a_rule_takes(monkeypatch, hit):
    """`functools.partial` reaches TP203 only with `torch.autocast` (under any alias) as its callee -- that argument
    marks the statement itself -- and a method rule (`.type(...)`, `.cuda()`) acts on calls only: the partials and
    `device.type` reads of every model file cost no LibCST pass, while each hit form is found as by the full pass."""
    quiet = ("import functools\nfrom functools import partial\nimport torch\nimport torch.nn as nn\n\n\n# cuda\n"
             "norm = partial(nn.LayerNorm, eps=1e-6)\nact = functools.partial(nn.GELU, approximate='tanh')\n\n\n"
             "def f(x):\n    return x.device.type, x.dtype\n")
    calls = []
    orig = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda *a, **k: calls.append("x") or orig(*a, **k))
    assert DEFAULT.prefilter.search(quiet) is not None     # the marks, not the prefilter, decide
    assert fast.scan(quiet, "quiet.py", DEFAULT).findings == [] and calls == []
    assert fast.scan(hit, "hit.py", DEFAULT).findings and calls
    monkeypatch.setattr(engine, "analyze", orig)
    full, quick = _same(hit, "hit.py", DEFAULT)
    assert full == quick
