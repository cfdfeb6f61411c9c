"""The linter at repository scale (issue 32): the cache, what -v tells, one format on stdout, ruff's flags and keys,
notebooks (issue 30 item 4). Each test re-creates one pattern in a small tree of its own."""

from __future__ import annotations

import json
import logging

import pytest
from test_repo_conventions import CUDA, invoke


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(CUDA)
    (tmp_path / "src" / "clean.py").write_text("import os\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHPORT_CACHE_DIR", raising=False)
    yield tmp_path
    logging.getLogger("torchport").setLevel(logging.WARNING)


def test_global_options_after_the_verb(repo, caplog):
    assert invoke("scan", "-q", "--exit-zero").exit_code == 0
    caplog.set_level(logging.INFO, logger="torchport")
    res = invoke("scan", "src", "-v", "--exit-zero", "--no-cache")
    assert res.exit_code == 0, res.output
    text = caplog.text
    assert "settings: none found (defaults)" in text and "cache: off" in text
    assert " s  src/a.py" in text           # per-file time


def test_verbose_names_the_config_and_why_files_are_left_out(repo, caplog):
    (repo / "pyproject.toml").write_text('[tool.torchport]\nextend-exclude = ["src/gen_*.py"]\n')
    (repo / "src" / "gen_x.py").write_text(CUDA)
    caplog.set_level(logging.INFO, logger="torchport")
    res = invoke("scan", "-v", "--exit-zero")
    assert res.exit_code == 0, res.output
    assert f"settings: {repo / 'pyproject.toml'}" in caplog.text
    assert "skipped src/gen_x.py: excluded by pattern" in caplog.text


def test_a_named_excluded_file_warns_and_is_not_scanned(repo, caplog):
    (repo / "pyproject.toml").write_text('[tool.torchport]\nextend-exclude = ["src/a.py"]\n')
    res = invoke("scan", "src/a.py")
    assert res.exit_code == 0, res.output
    assert "in 0 file(s) of 0 scanned" in res.stdout
    assert any("src/a.py: not scanned" in r.getMessage() and "--force-exclude" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)


def test_stdout_carries_exactly_one_format(repo):
    res = invoke("fix", "src", "--format", "json")
    payload = json.loads(res.stdout)           # nothing but the JSON on stdout
    assert payload["written"] is False and payload["diffs"][0]["file"].endswith("a.py")
    assert "+x = torch.zeros(3).to(torchport.device())" in payload["diffs"][0]["diff"]
    res = invoke("fix", "src", "--json", "-")
    assert json.loads(res.stdout)["diffs"]
    scanned = json.loads(invoke("scan", "src", "--format", "json").stdout)
    assert "written" not in scanned and "diffs" not in scanned


def test_statistics_and_show_fixes(repo):
    res = invoke("scan", "src", "--statistics")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["1", "TP101", "[*]", "cuda-method"] and "TP110" in lines[1]
    res = invoke("fix", "src", "--write", "--show-fixes")
    assert "2 finding(s) fixed" in res.output and "1 x TP101 (cuda-method)" in res.output


def test_add_noqa_then_nothing_is_found(repo):
    res = invoke("scan", "src", "--add-noqa")
    assert res.exit_code == 0 and "added 2 noqa comment(s)" in res.output
    text = (repo / "src" / "a.py").read_text()
    assert "x = torch.zeros(3).cuda()  # noqa: TP101\n" in text
    assert invoke("scan", "src", "--no-cache").exit_code == 0


def test_standalone_torchport_toml_and_the_extend_keys(repo):
    (repo / "pyproject.toml").write_text('[tool.torchport]\nselect = ["TP2"]\n')   # the standalone file wins
    (repo / "torchport.toml").write_text('extend-select = ["TP901"]\nextend-ignore = ["TP110"]\n'
                                         'exclude = ["build/"]\n')
    (repo / "src" / "load.py").write_text("import torch\n\nsd = torch.load('m.pt')\n")
    (repo / ".venv").mkdir()
    (repo / ".venv" / "v.py").write_text(CUDA)           # `exclude` replaced the default folders: scanned now
    (repo / "build").mkdir()
    (repo / "build" / "b.py").write_text(CUDA)
    res = invoke("scan", "--output-format", "concise", "--no-cache")
    codes = {line.split()[1] for line in res.stdout.splitlines() if ": TP" in line}
    files = {line.split(":")[0] for line in res.stdout.splitlines() if ": TP" in line}
    assert "TP901" in codes and "TP110" not in codes and "TP101" in codes
    assert files == {"src/a.py", "src/load.py", ".venv/v.py"}


def test_the_cache_answers_unchanged_files_and_only_those(repo, caplog):
    caplog.set_level(logging.INFO, logger="torchport")
    first = invoke("scan", "src", "-v", "--output-format", "concise")
    assert "answered by the cache" in caplog.text and "0 answered" in caplog.text
    cache = repo / ".torchport_cache"
    assert (cache / ".gitignore").read_text().strip().endswith("*") and list(cache.glob("scan-*.json"))
    caplog.clear()
    second = invoke("scan", "src", "-v", "--output-format", "concise")
    assert "2 answered by the cache" in caplog.text and second.stdout == first.stdout
    (repo / "src" / "clean.py").write_text("import torch\nz = torch.cuda.synchronize()\n")
    caplog.clear()
    third = invoke("scan", "src", "-v", "--output-format", "concise")
    assert "1 answered by the cache" in caplog.text and "src/clean.py:2:5: TP113" in third.stdout
    other = repo / "elsewhere"
    invoke("scan", "src", "--cache-dir", str(other))
    assert list(other.glob("scan-*.json"))
    before = sorted(p.name for p in cache.iterdir())
    invoke("scan", "src", "--no-cache", "--select", "TP1")
    assert sorted(p.name for p in cache.iterdir()) == before


def test_a_settings_change_is_not_answered_from_the_cache(repo):
    invoke("scan", "src")
    res = invoke("scan", "src", "--select", "TP101", "--output-format", "concise")
    assert "TP110" not in res.stdout and "TP101" in res.stdout
    res = invoke("scan", "src", "--ignore", "TP101", "--output-format", "concise")
    assert "TP101" not in res.stdout and "TP110" in res.stdout


NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# title with cuda\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {},
         "outputs": [{"name": "stdout", "output_type": "stream", "text": ["cuda:0\n"]}],
         "source": ["%matplotlib inline\n", "import torch\n", "!nvidia-smi\n", "x = torch.zeros(2).cuda()"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["%%bash\n", "echo x.cuda()\n"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
         "source": ["files = !ls\n", "for i in range(2):\n", "    y = x.cuda()\n"]},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def test_notebooks_scanned_and_fixed_like_ruff(repo):
    nb = repo / "src" / "nb.ipynb"
    text = json.dumps(NOTEBOOK, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    nb.write_text(text)
    res = invoke("scan", "src", "--output-format", "concise", "--no-cache")       # directory walks take notebooks
    found = [line for line in res.stdout.splitlines() if line.startswith("src/nb.ipynb")]
    assert found == ["src/nb.ipynb:cell 2:line 4:col 5: TP101 [*] `.cuda()` only targets CUDA devices; use "
                     "`.to(torchport.device())`",
                     "src/nb.ipynb:cell 4:line 3:col 9: TP101 [*] `.cuda()` only targets CUDA devices; use "
                     "`.to(torchport.device())`"]
    res = invoke("fix", "src/nb.ipynb", "--write", "--no-cache")
    assert res.exit_code == 0, res.output
    after = nb.read_text()
    data = json.loads(after)
    assert after == json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"   # the layout kept
    assert [c.get("outputs") for c in data["cells"]] == [c.get("outputs") for c in NOTEBOOK["cells"]]
    cells = ["".join(c["source"]) for c in data["cells"]]
    assert cells[0] == "# title with cuda\n" and cells[2] == "%%bash\necho x.cuda()\n"
    assert "%matplotlib inline\nimport torch\n!nvidia-smi\nx = torch.zeros(2).to(torchport.device())" in cells[1]
    assert cells[3] == "files = !ls\nfor i in range(2):\n    y = x.to(torchport.device())\n"
    assert invoke("scan", "src/nb.ipynb", "--no-cache").exit_code == 0


def test_ipython_help_syntax_is_left_alone(repo):
    """`obj?`, `obj??`, `?obj` and the wildcard search `torch.*Tensor?` (Atcold/NYU-DLSP20's tensor tutorial) are
    IPython lines: the notebook is still analysed (it was 'not valid Python' and nothing of it was scanned), and a
    fix leaves them as written."""
    cells = ["import torch\ntorch.*Tensor?\n", "torch.nn.Module??\n?torch.zeros\nx = torch.ones(2).cuda()\n"]
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": str(i), "metadata": {}, "outputs": [],
                     "source": c.splitlines(keepends=True)} for i, c in enumerate(cells)],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = repo / "src" / "help.ipynb"
    path.write_text(json.dumps(nb, indent=1) + "\n")
    res = invoke("scan", "src/help.ipynb", "--output-format", "concise", "--no-cache")
    assert res.stdout.splitlines()[0].startswith("src/help.ipynb:cell 2:line 3:col 5: TP101"), res.output
    assert invoke("fix", "src/help.ipynb", "--write", "--no-cache").exit_code == 0
    after = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert after[0].endswith("torch.*Tensor?\n") and "torch.nn.Module??\n?torch.zeros\n" in after[1], after
    assert "x = torch.ones(2).to(torchport.device())" in after[1], after


def test_extension_maps_another_suffix(repo):
    (repo / "src" / "tool.pyw").write_text(CUDA)
    res = invoke("scan", "src", "--output-format", "concise", "--no-cache")
    assert "tool.pyw" not in res.stdout
    res = invoke("scan", "src", "--output-format", "concise", "--no-cache", "--extension", "pyw:python")
    assert "src/tool.pyw:3:5: TP101" in res.stdout
    (repo / "torchport.toml").write_text('extend-include = ["*.pyw"]\n')
    assert "src/tool.pyw:3:5: TP101" in invoke("scan", "src", "--output-format", "concise", "--no-cache").stdout


def test_piped_rules_are_plain_short_lines():
    res = invoke("rules")
    lines = res.stdout.splitlines()
    assert len(lines) > 40 and lines[0].startswith("TP101  cuda-method  ")
    assert max(len(line) for line in lines) < 300


def test_no_cache_for_stdin(repo):
    res = invoke("scan", "-", "--stdin-filename", "x.py", input=CUDA)
    assert res.exit_code == 1 and not (repo / ".torchport_cache").exists()
