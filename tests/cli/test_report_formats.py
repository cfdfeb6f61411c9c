"""One way to choose report formats in every verb: ``--format FMT`` (the terminal) and ``-o [FMT:]FILE``.

The suffix table, the ``FMT:`` prefix, per-verb supported formats, one-line usage errors before any
work, several files at once, stdout, and the deprecated spellings (same bytes as the new ones).
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from torchport.cli import _options
from torchport.cli.main import app

CUDA = "import torch\n\nmodel = Net().cuda()\ntorch.cuda.synchronize()\n"
SCRIPT = "import torch\nx = torch.ones(2).cuda()\nprint('ran', x.device)\n"
CHECK = ["check", "--only", "data", "--device", "cpu"]   # the fastest check (well under a second)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def one_error_line(res, verb: str) -> str:
    """The usage error: exit 2, exactly one line on stderr, no traceback."""
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"torchport {verb}: error:"), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


@pytest.fixture
def src(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(CUDA)
    Path("script.py").write_text(SCRIPT)
    return tmp_path


# -- the one suffix table and the FMT: prefix ---------------------------------------------------------

@pytest.mark.parametrize("name, fmt", [
    ("r.json", "json"), ("r.sarif", "sarif"), ("r.sarif.json", "sarif"), ("R.SARIF.JSON", "sarif"),
    ("r.csv", "csv"), ("r.xml", "junit"), ("r.html", "html"), ("r.htm", "html"), ("r.md", "markdown"),
    ("r.txt", "text"), ("out/dir.json/r.pdf", None), ("r", None), (".json", None)])
def test_suffix_table(name, fmt):
    assert _options.suffix_format(name) == fmt


@pytest.mark.parametrize("verb, formats, ok, rejected", [
    ("scan", ("text", "json", "sarif", "csv"), {"a.json": "json", "a.sarif": "sarif", "a.csv": "csv", "a.txt": "text",
                                                "sarif:a.out": "sarif", "CSV:a.log": "csv", "json:-": "json"},
     ["a.xml", "a.html", "a.md", "junit:a.out"]),
    ("check", ("text", "json", "junit", "markdown", "html"), {"a.xml": "junit", "a.md": "markdown", "a.htm": "html",
                                                              "a.json": "json", "html:a": "html"},
     ["a.sarif", "a.csv", "sarif:a.out"]),
    ("run", ("text", "json", "none"), {"a.json": "json", "a.txt": "text", "text:a.log": "text"},
     ["a.xml", "a.csv", "none:a.txt", "html:a.html"]),
])
def test_parse_outputs_per_verb(verb, formats, ok, rejected, capsys):
    import typer

    got = _options.parse_outputs(verb, list(ok), formats)
    assert {v: o.fmt for v, o in zip(ok, got)} == ok
    assert [o.path for o in got if o.prefixed] == [v.split(":", 1)[1] for v in ok if ":" in v]
    for value in rejected + ["a.pdf", "-", "xml:a.xml", "json:"]:
        with pytest.raises(typer.Exit) as exc:
            _options.parse_outputs(verb, [value], formats)
        assert exc.value.exit_code == 2
        line = capsys.readouterr().err.strip()
        assert line.count("\n") == 0 and line.startswith(f"torchport {verb}: error: -o {value}:"), line


def test_a_bad_output_fails_before_any_work(src, monkeypatch):
    import torchport.checks.runner
    import torchport.migrate.runner

    def boom(*a, **k):
        raise AssertionError("work started before the report options were checked")

    monkeypatch.setattr(torchport.checks.runner, "run_checks", boom)
    monkeypatch.setattr(torchport.migrate.runner, "run", boom)
    line = one_error_line(invoke(*CHECK, "-o", "ok.json", "-o", "r.pdf"), "check")
    assert "r.pdf" in line and ".xml" in line and ".md" in line and "-o FMT:FILE" in line
    assert not Path("ok.json").exists()
    line = one_error_line(invoke(*CHECK, "-o", "r.sarif"), "check")
    assert "does not write 'sarif'" in line and ".html" in line
    line = one_error_line(invoke(*CHECK, "--format", "csv"), "check")
    assert "'csv'" in line and "text | json | junit | markdown | html" in line
    line = one_error_line(invoke("scan", "train.py", "-o", "a.json", "-o", "r.xml"), "scan")
    assert "r.xml" in line and "does not write 'junit'" in line and ".sarif" in line and "FMT:FILE" in line
    assert not Path("a.json").exists()
    one_error_line(invoke("fix", "train.py", "-o", "r.md"), "fix")
    one_error_line(invoke("scan", "train.py", "--json", "-", "-o", "csv:-"), "scan")   # one report on stdout
    line = one_error_line(invoke("run", "-o", "r.html", "script.py"), "run")
    assert "r.html" in line and ".json .txt" in line
    one_error_line(invoke("run", "--format", "sarif", "script.py"), "run")
    assert "ran" not in invoke("run", "--format", "csv", "script.py").stdout   # the script never started


# -- several files at once, stdout --------------------------------------------------------------------

def test_scan_writes_several_formats_at_once(src):
    res = invoke("scan", "train.py", "-o", "a.json", "-o", "b.sarif", "-o", "c.csv", "-o", "json:d.out")
    assert res.exit_code == 1, res.output   # findings
    assert "TP101" in res.stdout           # the terminal still shows the text report
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("wrote")] == [
        "wrote a.json", "wrote b.sarif", "wrote c.csv", "wrote d.out"]
    assert [f["code"] for f in json.loads(Path("a.json").read_text())["findings"]] == ["TP101", "TP113"]
    sarif = json.loads(Path("b.sarif").read_text())
    assert sarif["version"] == "2.1.0" and [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["TP101", "TP113"]
    rows = list(csv.reader(io.StringIO(Path("c.csv").read_text())))
    assert rows[0][:2] == ["File", "Start Line"] and [r[3].split()[0] for r in rows[1:]] == ["TP101", "TP113"]
    assert Path("d.out").read_text() == Path("a.json").read_text()
    assert not list(src.glob(".*.tmp"))    # atomic writes leave no temp file


@pytest.mark.parametrize("fmt, parse", [("json", json.loads), ("sarif", json.loads),
                                        ("csv", lambda t: list(csv.reader(io.StringIO(t))))])
def test_scan_format_on_stdout_parses(src, fmt, parse):
    res = invoke("scan", "train.py", "--format", fmt)
    assert res.exit_code == 1 and parse(res.stdout) and "deprecated" not in res.stderr


def test_check_writes_junit_markdown_html_at_once(src):
    res = invoke(*CHECK, "-o", "r.xml", "-o", "r.md", "-o", "r.html", "-o", "r.txt")
    assert res.exit_code == 0, res.output
    assert "wrote r.xml" in res.stdout and "wrote r.html" in res.stdout and "data-determinism" in res.stdout
    suite = ET.parse("r.xml").getroot().find("testsuite")
    assert suite.get("tests") == "1" and suite.find("testcase").get("name") == "data-determinism"
    assert Path("r.md").read_text().startswith("# torchport check: PASS")
    assert Path("r.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert "1 passed, 0 warned, 0 failed" in Path("r.txt").read_text()


def test_check_format_json_on_stdout(src):
    res = invoke(*CHECK, "--format", "json", "-o", "r.md")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)           # nothing but JSON on stdout; "wrote" goes to stderr
    assert doc["format"] == "torchport-check/1" and [c["name"] for c in doc["checks"]] == ["data-determinism"]
    assert "wrote r.md" in res.stderr


def test_a_report_that_cannot_be_written_fails_with_io_and_the_others_are_written(src):
    Path("blocker").write_text("a file, not a directory")
    res = invoke("scan", "train.py", "-o", "blocker/x.sarif", "-o", "a.json")
    assert res.exit_code == 6, res.output   # ExitCode.IO beats findings
    assert "torchport scan: error: cannot write blocker/x.sarif" in res.stderr and Path("a.json").is_file()


def test_run_format_none_text_json_and_output_files(src):
    res = invoke("run", "--device", "cpu", "--format", "none", "-o", "r.txt", "-o", "r.json", "script.py")
    assert res.exit_code == 0 and "ran cpu" in res.stdout
    assert "torchport shim" not in res.stderr and "wrote r.txt" in res.stderr   # no report, files announced
    assert Path("r.txt").read_text().startswith("torchport shim: CUDA calls redirected to cpu")
    assert json.loads(Path("r.json").read_text())["total_redirects"] == 1
    res = invoke("run", "--device", "cpu", "--format", "text", "script.py")
    assert "torchport shim: CUDA calls redirected to cpu" in res.stderr and "torch.Tensor.cuda" in res.stderr
    res = invoke("run", "--device", "cpu", "--format", "json", "script.py")
    assert json.loads(res.stderr)["redirects"][0]["api"] == "torch.Tensor.cuda"
    res = invoke("run", "--device", "cpu", "--format", "none", "--json", "j.json", "script.py")
    assert res.stderr == "" and json.loads(Path("j.json").read_text())["total_redirects"] == 1


# -- the old spellings: hidden, deprecated, same bytes -----------------------------------------------

def test_check_aliases_give_the_same_bytes(src):
    res = invoke(*CHECK, "--junit", "old.xml", "-o", "junit:new.xml", "--markdown", "old.md", "-o", "new.md",
                 "--html", "old.html", "-o", "html:new.html")
    assert res.exit_code == 0, res.output
    for old, new, kind in (("old.xml", "new.xml", "junit"), ("old.md", "new.md", "markdown"),
                           ("old.html", "new.html", "html")):
        assert Path(old).read_bytes() == Path(new).read_bytes() and Path(old).stat().st_size > 100
        flag = {"junit": "--junit", "markdown": "--markdown", "html": "--html"}[kind]
        assert f"torchport check: warning: {flag} FILE is deprecated; use -o {kind}:{old}" in res.stderr


@pytest.mark.parametrize("fmt, name", [("json", "out.txt"), ("sarif", "scan.sarif"), ("csv", "changes"),
                                       ("text", "report.log")])
def test_scan_old_format_with_one_output_keeps_its_bytes(src, fmt, name):
    old = invoke("scan", "train.py", "--format", fmt, "-o", name)
    new = invoke("scan", "train.py", "-o", f"{fmt}:new.{fmt}")
    assert old.exit_code == new.exit_code == 1
    def timeless(path):   # the JSON report carries the scan's duration
        return re.sub(rb'"seconds": [0-9.e-]+', b"", Path(path).read_bytes())

    assert timeless(name) == timeless(f"new.{fmt}") and Path(name).stat().st_size > 50
    assert old.stdout == ""                 # as before: the file, nothing on the terminal
    assert f"--format {fmt} -o FILE is deprecated; use -o {fmt}:{name}" in old.stderr


def test_run_report_alias(src):
    def stderr(*args):
        res = invoke("run", "--device", "cpu", *args, "script.py")
        assert res.exit_code == 0 and "ran cpu" in res.stdout
        return res.stderr

    for value in ("text", "none"):
        old = stderr("--report", value)
        assert "torchport run: warning: --report is deprecated; use --format" in old
        assert old.split("\n", 1)[1] == stderr("--format", value)
    old = stderr("--report", "json")   # keeps its meaning: JSON on stderr, or only the --json file
    assert "--report json is deprecated; use --json FILE" in old and old.split("\n", 1)[1] == stderr("--format", "json")
    assert stderr("--report", "json", "--json", "r.json").count("\n") == 1 and Path("r.json").is_file()
    res = invoke("run", "--report", "x", "script.py")
    assert res.exit_code == 2 and "unknown --format 'x'" in res.stderr


def test_old_spellings_are_hidden_and_new_ones_shown():
    from test_cli_options import snapshot

    snap = snapshot()
    for verb, old in (("check", {"--junit", "--html", "--markdown"}), ("run", {"--report"})):
        assert old <= set(snap[verb]["deprecated_aliases"]), verb
    for verb in ("scan", "fix", "check", "run"):
        names = {n for spelled in snap[verb]["options"] for n in spelled.split("/")}  # scan/fix: also --output-format
        assert {"--format", "--output", "-o", "--json"} <= names, verb
    for verb in ("check", "run"):
        res = invoke(verb, "--help")
        text = " ".join(res.stdout.split())
        assert "--format FMT" in text and "[FMT:]FILE" in text and "--junit" not in text and "--report " not in text
