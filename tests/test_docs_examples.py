"""The README's and docs' examples cannot drift from the code.

* Every ``torchport`` command in a shell block (README.md, docs/*.md) is parsed by the real CLI:
  an unknown verb or option, or a missing argument, fails here (nothing is run).
* Every Python block must at least parse.
* Blocks marked ``<!-- runnable -->`` (optionally ``<!-- runnable: prelude=NAME -->``, NAME one of
  :data:`PRELUDES` below, for the objects the prose assumes) on the line before the fence are
  executed as written, in a scratch directory, and must succeed. Mark only blocks that finish in
  seconds on a CPU.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchport.cli.main import command
from clean_env import clean_env

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- runnable(?::\s*prelude=(?P<prelude>\w+))?\s*-->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```",
                   re.S)

_DATA = """
import torch
dataset = torch.utils.data.TensorDataset(torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))
"""
_LOOP = _DATA + """
import torchport
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))), batch_size=2)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 10))
criterion = torch.nn.CrossEntropyLoss()
optimizer = opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 1)
amp = torchport.Amp("fp32")
cfg, epoch, step = {}, 0, 0
"""
#: What a block's surrounding prose assumes to exist.
PRELUDES = {
    "dataset": _DATA,
    "loop": _LOOP,
    "train": 'import torch\n\ndef train():\n    torch.zeros(2, device="cuda").sum()   # a CUDA-only line\n',
}


def blocks():
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            runnable = m.group(0).startswith("<!-- runnable")
            line = text[: m.start("body")].count("\n")
            yield pytest.param(path, line, m.group("lang"), m.group("body"), runnable, m.group("prelude"),
                               id=f"{path.name}:{line}")


def _logical_lines(body: str) -> list[str]:
    out, cur = [], ""
    for raw in body.splitlines():
        cur += raw.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        out.append(cur)
        cur = ""
    return [ln for ln in out if ln.strip()]


def torchport_argv(line: str) -> list[str] | None:
    """The argv a shell line hands to the torchport CLI (None: the line does not run torchport)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    for i, w in enumerate(words):
        if w.endswith("/torchport") or w == "torchport":
            if i > 0 and words[i - 1] == "-m":       # python -m torchport / torchrun ... -m torchport
                return words[i + 1:]
            if i == 0 or "=" in words[i - 1] or words[i - 1] in ("&&", ";"):
                return words[i + 1:]
        if w == "torchport.train" and i > 0 and words[i - 1] == "-m":
            return ["train", *words[i + 1:]]
    return None


def parse_only(argv: list[str]) -> None:
    """Parse ``argv`` with the real command tree, down to the leaf verb, without running anything."""
    cmd, name = command(), "torchport"
    while True:
        ctx = cmd.make_context(name, list(argv))
        old = [p.opts[0] for p in cmd.params if getattr(p, "hidden", False) and ctx.params.get(p.name) not in (None, False)]
        assert not old, f"deprecated spelling {old} (use the current option name)"
        subs = getattr(cmd, "commands", None)
        if not subs:
            return
        rest = [*(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None) or []), *ctx.args]
        if not rest:
            return
        sub = cmd.get_command(ctx, rest[0])
        assert sub is not None, f"unknown verb {rest[0]!r}"
        cmd, name, argv = sub, rest[0], rest[1:]


@pytest.mark.parametrize("path, line, lang, body, runnable, prelude", list(blocks()))
def test_doc_block(path, line, lang, body, runnable, prelude, tmp_path):
    where = f"{path.relative_to(ROOT)}:{line}"
    if lang == "python":
        code = textwrap.dedent(body)
        ast.parse(code, filename=where)
        if runnable:
            script = tmp_path / "example.py"
            script.write_text(PRELUDES[prelude] + "\n" + code if prelude else code)
            out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                                 timeout=300, env=_env(tmp_path))
            assert out.returncode == 0, f"{where}: {out.stderr[-2000:]}"
        return
    if lang not in ("bash", "sh", "shell", "console"):
        return
    for ln in _logical_lines(body):
        argv = torchport_argv(ln)
        if argv is not None and "..." not in argv:
            try:
                parse_only(argv)
            except Exception as exc:  # click's UsageError and friends
                pytest.fail(f"{where}: `{ln.strip()}` does not parse: {exc}")
        if runnable:
            out = subprocess.run(["bash", "-c", ln], cwd=ROOT, capture_output=True, text=True, timeout=300,
                                 env=_env(tmp_path))
            assert out.returncode == 0, f"{where}: `{ln}` -> {out.returncode}\n{out.stdout[-1000:]}{out.stderr[-1000:]}"


def _env(tmp_path: Path) -> dict[str, str]:
    env = clean_env()
    env.update({"TORCHPORT_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    return env


def test_the_examples_are_found():
    """The collector sees the blocks (a broken regex would make every test above vacuous)."""
    found = list(blocks())
    shell = [p for p in found if p.values[2] == "bash"]
    assert len(found) > 20 and len(shell) > 8
    assert sum(p.values[4] for p in found) >= 4      # runnable blocks
    argvs = [torchport_argv(ln) for p in shell for ln in _logical_lines(p.values[3])]
    assert sum(a is not None for a in argvs) > 30


def test_parse_only_rejects_drift():
    with pytest.raises(Exception):
        parse_only(["profile", "--no-such-flag", "1"])
    with pytest.raises(Exception):
        parse_only(["nosuchverb"])
    with pytest.raises(AssertionError, match="deprecated spelling"):
        parse_only(["profile", "--batch", "8"])
    parse_only(["bench", "compare", "a.json", "b.json"])
