"""`torchport scan` / `fix` end to end on small trees: formats, exit codes, selection, files."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from torchport.cli.main import app
from torchport.migrate import render, scan_paths
from torchport.migrate.files import iter_python_files

CUDA = 'import torch\n\nmodel = Net().cuda()\ntorch.cuda.synchronize()\nscaler = torch.cuda.amp.GradScaler()\n'
CLEAN = "import torch\n\nx = torch.zeros(2)\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(CUDA)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    (tmp_path / "pkg" / "broken.py").write_text("x = torch.cuda(\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text(CUDA)
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "third.py").write_text(CUDA)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_gitignore_and_exclude_are_respected(tree):
    files = {p.as_posix() for p in iter_python_files(["."], exclude=["vendor"])}
    assert files == {"pkg/train.py", "pkg/clean.py", "pkg/broken.py"}
    assert "build/gen.py" in {p.as_posix() for p in iter_python_files(["."], respect_gitignore=False)}
    # a file named explicitly is scanned even when .gitignore'd
    assert [p.as_posix() for p in iter_python_files(["build/gen.py"])] == ["build/gen.py"]


def test_unparsable_file_is_reported_not_fatal(tree):
    report = scan_paths(["pkg"], jobs=1)
    assert [e.path for e in report.errors] == ["pkg/broken.py"]
    assert "not valid Python" in report.errors[0].message
    assert {f.path for f in report.findings} == {"pkg/train.py"}


def test_scan_exit_codes_and_text(tree):
    res = invoke("scan", "pkg/clean.py")
    assert res.exit_code == 0, res.output
    res = invoke("scan", "pkg/train.py")
    assert res.exit_code == 1
    assert "pkg/train.py" in res.output and "TP101" in res.output and "Summary by rule" in res.output
    assert invoke("scan", "pkg/train.py", "--exit-zero").exit_code == 0
    assert invoke("scan", "pkg/train.py", "--select", "TP9").exit_code == 0
    assert invoke("scan", "pkg/train.py", "--select", "TP1", "--ignore", "TP101,TP113").exit_code == 0
    bad = invoke("scan", "pkg/train.py", "--select", "TP777")
    assert bad.exit_code == 2 and "no rule" in bad.output
    assert invoke("scan", "missing.py").exit_code == 2


def test_scan_separates_findings_from_files_it_could_not_read(tree):
    """Issue 16 #6: findings exit 1; an unreadable/unparsable file exits 6 (IO), and --exit-zero hides only findings."""
    assert invoke("scan", "pkg/train.py").exit_code == 1
    assert invoke("scan", "pkg/broken.py").exit_code == 6
    assert invoke("scan", "pkg/broken.py", "--exit-zero").exit_code == 6
    assert invoke("scan", "pkg/train.py", "pkg/broken.py", "--exit-zero").exit_code == 6
    Path("pkg/latin.py").write_bytes(b"x = '\xe9'\n")          # not UTF-8, no coding cookie
    res = invoke("scan", "pkg/latin.py")
    assert res.exit_code == 6 and "pkg/latin.py" in res.output
    assert invoke("fix", "pkg/broken.py").exit_code == 6


def test_exclude_applies_to_a_path_outside_the_current_directory(tree, tmp_path_factory, monkeypatch):
    """Issue 16 #7: `scan /elsewhere --exclude X` (relative X and absolute X) skips X."""
    elsewhere = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(elsewhere)
    files = {p.name for p in iter_python_files([str(tree / "pkg")], exclude=["train.py"])}
    assert files == {"clean.py", "broken.py"}
    files = {p.name for p in iter_python_files([str(tree)], exclude=["vendor", "pkg/broken.py"])}
    assert files == {"train.py", "clean.py"}
    files = {p.name for p in iter_python_files([str(tree)], exclude=[str(tree / "vendor")])}
    assert "third.py" not in files
    res = invoke("scan", str(tree / "pkg" / "train.py"), "--exclude", "train.py")
    assert res.exit_code == 0, res.output


def test_json_report_shape(tree):
    res = invoke("scan", ".", "--exclude", "vendor", "--format", "json", "--output", "out.json", "--jobs", "1")
    assert res.exit_code == 6          # pkg/broken.py could not be parsed (IO beats findings)
    data = json.loads(Path("out.json").read_text())
    assert data["files"] == 3 and data["errors"][0]["file"] == "pkg/broken.py"
    codes = [f["code"] for f in data["findings"]]
    assert codes == ["TP101", "TP113", "TP202"]
    first = data["findings"][0]
    assert {"file", "line", "code", "message", "fixable"} <= set(first)
    assert first["file"] == "pkg/train.py" and first["line"] == 3 and first["fixable"] is True
    assert {r["code"]: r["count"] for r in data["summary"]} == {"TP101": 1, "TP113": 1, "TP202": 1}


def test_sarif_report(tree):
    invoke("scan", "pkg", "--format", "sarif", "-o", "out.sarif")
    sarif = json.loads(Path("out.sarif").read_text())
    assert sarif["version"] == "2.1.0" and "sarif-2.1.0" in sarif["$schema"]
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["TP101", "TP113", "TP202"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/train.py"
        assert result["level"] in ("error", "warning", "note")
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/broken.py"


def test_csv_change_list_after_fix(tree):
    res = invoke("fix", "pkg/train.py", "--write", "--format", "csv", "-o", "changes.csv")
    assert res.exit_code == 0, res.output  # everything here has a safe fix
    rows = list(csv.reader(io.StringIO(Path("changes.csv").read_text())))
    assert rows[0] == list(render.CSV_HEADER)
    assert [(r[0], r[1], r[3].split()[0], r[5]) for r in rows[1:]] == [
        ("pkg/train.py", "3", "TP101", "yes"), ("pkg/train.py", "4", "TP113", "yes"),
        ("pkg/train.py", "5", "TP202", "yes")]


def test_fix_diff_changes_nothing_and_write_is_idempotent(tree):
    before = Path("pkg/train.py").read_text()
    res = invoke("fix", "pkg/train.py")
    assert res.exit_code == 1
    assert "--- a/pkg/train.py" in res.stdout and "+model = Net().to(torchport.device())" in res.stdout
    assert Path("pkg/train.py").read_text() == before
    assert invoke("fix", "pkg/train.py", "--write").exit_code == 0
    once = Path("pkg/train.py").read_text()
    assert once.count("import torchport") == 1 and "torch.cuda" not in once
    assert invoke("fix", "pkg/train.py", "--write").exit_code == 0
    assert Path("pkg/train.py").read_text() == once
    assert invoke("scan", "pkg/train.py").exit_code == 0


def test_fix_keeps_unsafe_ones_until_asked(tree):
    Path("pkg/rank.py").write_text("import torch\n\nx = x.cuda(local_rank)\n")
    res = invoke("fix", "pkg/rank.py", "--write", "--json", "r.json")
    assert res.exit_code == 1 and Path("pkg/rank.py").read_text().endswith("x.cuda(local_rank)\n")
    assert json.loads(Path("r.json").read_text())["findings"][0]["fix_safety"] == "unsafe"
    assert invoke("fix", "pkg/rank.py", "--write", "--unsafe-fixes").exit_code == 0
    assert "x = x.to(torchport.device())" in Path("pkg/rank.py").read_text()


def test_parallel_and_serial_runs_agree(tree, monkeypatch):
    from torchport.migrate import runner

    for i in range(40):
        Path(f"pkg/m{i}.py").write_text(CUDA if i % 2 else CLEAN)
    pooled: list[list[str]] = []
    real_pool = runner._run_pool
    monkeypatch.setattr(runner, "_run_pool", lambda files, *a, **k: pooled.append(files) or real_pool(files, *a, **k))
    serial = scan_paths(["pkg"], jobs=1)
    assert pooled == []
    parallel = scan_paths(["pkg"], jobs=2)
    assert [f.to_dict() for f in serial.findings] == [f.to_dict() for f in parallel.findings]
    assert len(serial.findings) == 3 * 21
    # the workers get the files a rule may fire in; the parent answers the ones the text prefilter rules out
    assert len(pooled) == 1 and sorted(Path(f).name for f in pooled[0]) == sorted(
        p.name for p in Path("pkg").iterdir() if "cuda" in p.read_text())
    # by default, workers only for 2 MB or more of such files: this small tree runs in one process
    assert [f.to_dict() for f in scan_paths(["pkg"]).findings] == [f.to_dict() for f in serial.findings]
    assert len(pooled) == 1
    monkeypatch.setattr(runner, "_PARALLEL_MIN_BYTES", 100)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    scan_paths(["pkg"])
    assert len(pooled) == 2


def test_noqa_suppresses(tree):
    Path("pkg/q.py").write_text("import torch\nx = x.cuda()  # noqa: TP101\ny = y.cuda()  # noqa\nz = z.cuda()  # noqa: TP2\n")
    report = scan_paths(["pkg/q.py"])
    # line 4's `# noqa: TP2` silences nothing: TP101 stays, and TP801 says the comment is unused
    assert [(f.line, f.code) for f in report.findings] == [(4, "TP101"), (4, "TP801")]


def test_pre_commit_hooks_file():
    import yaml

    from migrate_helpers import REPO

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    by_id = {h["id"]: h for h in hooks}
    assert by_id["torchport-scan"]["entry"] == "torchport scan"
    assert by_id["torchport-scan"]["types_or"] == ["python", "jupyter"] == by_id["torchport-fix"]["types_or"]
    assert by_id["torchport-fix"]["entry"].startswith("torchport fix --write")


def test_bad_format_is_a_usage_error(tree):
    res = invoke("scan", "pkg/clean.py", "--format", "xml")
    assert res.exit_code == 2 and "unknown --format" in res.output


def test_write_keeps_file_mode_newlines_and_encoding(tree):
    import os
    import stat

    p = Path("pkg/run.py")
    p.write_bytes(b"#!/usr/bin/env python\r\n# -*- coding: latin-1 -*-\r\nimport torch\r\n# caf\xe9\r\nx = x.cuda()\r\n")
    p.chmod(0o755)
    assert invoke("fix", str(p), "--write").exit_code == 0
    data = p.read_bytes()
    assert b"x = x.to(torchport.device())\r\n" in data and b"caf\xe9" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert os.stat(p).st_mode & stat.S_IXUSR


def test_fix_check_exits_1_when_a_fix_would_change_a_file_and_writes_nothing(tmp_path):
    dirty = tmp_path / "dirty.py"
    dirty.write_text("import torch\nx = torch.ones(2).npu()\n")
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nx = torch.ones(2)\n")
    res = CliRunner().invoke(app, ["fix", "--check", str(dirty), str(clean)])
    assert res.exit_code == 1, res.output
    assert f"would fix {dirty}" in res.output and "clean.py" not in res.output.split("would fix")[-1]
    assert dirty.read_text() == "import torch\nx = torch.ones(2).npu()\n"  # nothing written
    res = CliRunner().invoke(app, ["fix", "--check", str(clean)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["fix", "--check", "--write", str(dirty)])
    assert res.exit_code == 2


def test_fix_check_writes_the_report_files_it_is_asked_for(tmp_path):
    """`fix --check` speaks the same report vocabulary: --json / -o files, --format on stdout."""
    dirty = tmp_path / "dirty.py"
    dirty.write_text("import torch\nx = torch.ones(2).npu()\n")
    res = CliRunner().invoke(app, ["fix", "--check", str(dirty), "--json", str(tmp_path / "r.json"),
                                   "-o", str(tmp_path / "r.sarif")])
    assert res.exit_code == 1, res.output
    assert f"would fix {dirty}" in res.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [f["code"] for f in doc["findings"]] and "dirty.py" in json.dumps(doc["findings"][0])
    assert json.loads((tmp_path / "r.sarif").read_text())["version"] == "2.1.0"
    assert dirty.read_text() == "import torch\nx = torch.ones(2).npu()\n"
    res = CliRunner().invoke(app, ["fix", "--check", str(dirty), "--format", "json"])
    assert res.exit_code == 1
    assert "would fix" not in res.stdout and json.loads(res.stdout)["findings"]
