"""One message vocabulary in every verb: ``torchport[ VERB]: error: …`` and ``torchport[ VERB]: warning: …``.

Two greps over the code, so a new message path cannot slip in with a third heading:

* every string in ``src/torchport`` that starts (after rich markup) with ``torchport`` + a verb + ``:``
  must go on with ``error:`` or ``warning:`` -- or be one of the few titles listed below, with the reason;
* no message starts with a bare ``error:`` / ``warning:`` (without saying it is torchport's).

And the verbs the issue named, run for real: ``run``'s CPU-fallback warning and its errors, and a
``data pack`` write error.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from torchport.cli.main import app

SRC = Path(__file__).resolve().parents[1] / "src" / "torchport"
HEADING = re.compile(r"^torchport(?: [a-z{][\w{}.-]*)*: ")
BARE = re.compile(r"^(?:error|warning):")
MARKUP = re.compile(r"^(?:\[/?[a-z #]*\])+")

#: (file, start of the text) -> why it is not an error or warning line
TITLES = {
    ("__init__.py", "torchport: one PyTorch"): "the package docstring",
    ("shim/report.py", "torchport shim: CUDA calls redirected"): "the title of run's redirect report",
    ("shim/core.py", "torchport shim: no accelerator found"): "a warning's text: the CLI prints it as torchport: warning:",
    ("shim/core.py", "torchport shim could not restore"): "an exception's text: printed after torchport VERB: error:",
    ("emulate/__init__.py", "torchport: emulated Ascend NPU installed"): "an info log record (the handler drops the prefix)",
    ("emulate/_native.py", "torchport: building the emulated NPU"): "a log record (the handler drops the prefix)",
    ("emulate/_native.py", "torchport: emulated NPU native module built"): "an info log record",
}


def _leading_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        text = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return text + "{}"
            text += part.value
        return text
    return None


def _messages():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parts_of_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in parts_of_fstrings:
                continue
            text = _leading_text(node)
            if text is not None:
                yield rel, node.lineno, MARKUP.sub("", text.lstrip())


def test_every_torchport_heading_is_an_error_or_a_warning():
    bad = []
    for rel, line, text in _messages():
        m = HEADING.match(text)
        if m is None:
            continue
        rest = text[m.end():]
        if rest.startswith(("error: ", "warning: ", "{}")) or "{}" in m.group(0):
            continue
        if any(rel == f and text.startswith(start) for f, start in TITLES):
            continue
        bad.append(f"{rel}:{line}: {text[:70]!r}")
    assert not bad, "messages with a heading that is neither error: nor warning:\n" + "\n".join(bad)


def test_no_bare_error_or_warning_heading():
    bad = [f"{rel}:{line}: {text[:70]!r}" for rel, line, text in _messages() if BARE.match(text)]
    assert not bad, "say whose message it is (torchport: warning: ...):\n" + "\n".join(bad)


def test_run_speaks_the_vocabulary(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import torch\nprint(torch.ones(1).cuda().device)\n")
    env_run = [sys.executable, "-m", "torchport", "run", "--device", "auto", "--allow-cpu", "--format", "none"]
    out = subprocess.run([*env_run, str(script)], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "TORCHPORT_DEVICE": "", "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr
    assert "torchport: warning: no accelerator found" in out.stderr
    assert "run:0" not in out.stderr and "CPUFallbackWarning" not in out.stderr
    missing = subprocess.run([sys.executable, "-m", "torchport", "run", str(tmp_path / "nope.py")],
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [f"torchport run: error: script not found: '{tmp_path / 'nope.py'}'"]


def _errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "error:" in ln]


def test_data_pack_errors_have_one_heading(tmp_path):
    from PIL import Image

    res = CliRunner().invoke(app, ["data", "pack", str(tmp_path / "missing"), str(tmp_path / "out")])
    assert res.exit_code == 3
    assert [ln.split(" error: ")[0] for ln in _errors(res.stderr)] == ["torchport data pack:"]
    (tmp_path / "src" / "cat").mkdir(parents=True)
    Image.new("RGB", (32, 32)).save(tmp_path / "src" / "cat" / "a.jpg")
    (tmp_path / "file").write_text("not a folder")
    res = CliRunner().invoke(app, ["data", "pack", str(tmp_path / "src"), str(tmp_path / "file" / "out")])
    assert res.exit_code == 6, res.output
    assert [ln.split(" error: ")[0] for ln in _errors(res.stderr)] == ["torchport data pack:"]
