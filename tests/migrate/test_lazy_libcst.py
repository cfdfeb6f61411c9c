"""LibCST is imported only by a file that reaches the LibCST pass (:mod:`torchport.migrate._cst`).

A scan whose files hold no needle, or whose ``ast`` marks find nothing, never imports LibCST -- the rules'
declarations (:class:`~torchport.migrate.ruleset.RuleSet`) are read without it. Each check runs in a fresh
interpreter (this test process has LibCST imported long since) and reads ``sys.modules`` at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clean_env import clean_env

_PROBE = """
import json, sys
from torchport.migrate import runner
report = runner.run(sys.argv[1:], runner.Options(jobs=1))
print(json.dumps({"findings": [f.code for f in report.findings], "libcst": "libcst" in sys.modules,
                  "engine": "torchport.migrate.engine" in sys.modules}))
"""


def _probe(*files: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, *map(str, files)], capture_output=True, text=True,
                         env=clean_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        # no needle at all: the text prefilter answers
        "plain": "import os\n\nprint(os.getcwd())\n",
        # needles ("cuda", "rank"), but only in places no rule hook reaches: the ast marks answer
        "needle": ('"""Runs on cuda when there is one."""\nimport torch\n\n\ndef world(rank):\n'
                   '    # cuda is picked by the caller\n    return torch.zeros(2) + rank\n'),
        # a finding: LibCST is needed
        "finding": "import torch\n\nx = torch.zeros(2).cuda()\n",
    }
    out = {}
    for name, text in made.items():
        out[name] = tmp_path / f"{name}.py"
        out[name].write_text(text)
    return out


def test_files_without_a_hook_import_no_libcst(files):
    got = _probe(files["plain"], files["needle"])
    assert got == {"findings": [], "libcst": False, "engine": False}


def test_a_finding_still_imports_libcst_and_reports(files):
    got = _probe(files["plain"], files["finding"])
    assert got["findings"] == ["TP101"] and got["libcst"] and got["engine"]


def test_the_scan_command_imports_neither_libcst_nor_pydantic(files):
    """The whole ``torchport scan`` process: ``-X importtime`` lists every module it imported."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "torchport", "scan", str(files["plain"]),
                          str(files["needle"]), "--no-cache"], capture_output=True, text=True, env=clean_env(),
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "typer" in imported                     # the log is the one asked for
    assert not {m for m in imported if m.split(".")[0] in ("libcst", "pydantic", "pydantic_core")}
