"""torchport in someone else's repository (issue 23): configured like ruff, output editors parse, quiet when asked.

Each test pins one convention a ruff / pre-commit user's hands expect: the default path, stdin, the
``[tool.torchport]`` table, file-level noqa, concise and GitHub output, ``--version``, completion, an
honest ``fix --diff`` report, global ``-q``/``-v``, and output that is not hard-wrapped in a pipe.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from torchport.cli.main import app

CUDA = "import torch\n\nx = torch.zeros(3).cuda()\ny = torch.cuda.is_available()\n"


def invoke(*args: str, input: str | None = None):  # noqa: A002 - click's name
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    """A small project: src/a.py with two findings, the current directory at its root."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(CUDA)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- the default path and stdin ------------------------------------------------------------------------------

@pytest.mark.parametrize("verb", ["scan", "fix"])
def test_no_path_means_the_current_directory(repo, verb):
    res = invoke(verb, "--output-format", "concise")
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 1, res.output
    # stdout carries one format: the report asked for (fix shows its diff only with the text report)
    assert "src/a.py:3:5: TP101" in res.stdout
    assert "--- a/src/a.py" not in res.stdout


def test_stdin_dash_with_stdin_filename(repo):
    res = invoke("scan", "-", "--stdin-filename", "pkg/model.py", "--output-format", "concise", input=CUDA)
    assert res.exit_code == 1, res.output
    assert res.stdout.splitlines()[0].startswith("pkg/model.py:3:5: TP101 ")


def test_fix_stdin_write_prints_the_fixed_source(repo):
    res = invoke("fix", "-", "--write", "--format", "concise", input=CUDA)
    assert res.exit_code == 0, res.output
    assert res.stdout == ("import torch\nimport torchport\n\nx = torch.zeros(3).to(torchport.device())\n"
                          "y = torchport.current().is_accelerator\n")
    assert res.stderr.count("fixed 2 finding(s)") == 1
    assert (repo / "src" / "a.py").read_text() == CUDA   # nothing on disk changed


def test_stdin_filename_without_dash_is_a_usage_error(repo):
    res = invoke("scan", "src", "--stdin-filename", "x.py")
    assert res.exit_code == 2
    assert res.stderr.strip().startswith("torchport scan: error: --stdin-filename")


# -- output formats --------------------------------------------------------------------------------------------

def test_concise_is_one_parseable_line_per_finding(repo):
    res = invoke("scan", "src", "--output-format", "concise")
    lines = res.stdout.splitlines()
    assert lines[0] == "src/a.py:3:5: TP101 [*] `.cuda()` only targets CUDA devices; use `.to(torchport.device())`"
    assert lines[1].startswith("src/a.py:4:5: TP110 [*] ")
    assert lines[-1].startswith("2 finding(s) in 1 file(s)")


def test_github_format_is_workflow_annotations(repo):
    res = invoke("scan", "src", "--format", "github")
    first = res.stdout.splitlines()[0]
    assert first.startswith("::error file=src/a.py,line=3,col=5,endLine=3,endColumn=26,title=torchport (TP101)::TP101 ")
    assert len(res.stdout.splitlines()) == 2


def test_github_annotation_escapes_newlines_and_commas():
    from torchport.migrate.finding import Finding, Report
    from torchport.migrate.render import to_github

    f = Finding(path="a,b.py", line=1, column=2, end_line=1, end_column=3, code="TP101", name="n",
                message="two\nlines 100%", severity="warning", fix_safety="none")
    out = to_github(Report(findings=[f]))
    assert out == ("::warning file=a%2Cb.py,line=1,col=2,endLine=1,endColumn=3,title=torchport (TP101)"
                   "::TP101 two%0Alines 100%25\n")


# -- --version, completion -------------------------------------------------------------------------------------

def test_version():
    from torchport import __version__

    res = invoke("--version")
    assert res.exit_code == 0 and res.stdout == f"torchport {__version__}\n"


def test_shell_completion_completes_verbs():
    env = {**os.environ, "_TORCHPORT_COMPLETE": "complete_bash", "COMP_WORDS": "torchport sc", "COMP_CWORD": "1"}
    out = subprocess.run([sys.executable, "-m", "torchport"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "scan" in out.stdout.split()
    assert "--install-completion" in invoke("--help").stdout


# -- fix --diff says what would be fixed, never "fixed" ----------------------------------------------------------

def test_fix_diff_report_claims_nothing_was_fixed(repo):
    res = invoke("fix", "src", "-o", "r.json", "-o", "r.csv")
    assert res.exit_code == 1
    assert "+x = torch.zeros(3).to(torchport.device())" in res.stdout
    assert "fixed" not in res.stderr.replace("would be fixed", "")
    assert "2 would be fixed by the rewrite shown; nothing was written" in res.stderr
    report = json.loads((repo / "r.json").read_text())
    assert [(f["fixed"], f["would_fix"]) for f in report["findings"]] == [(False, True), (False, True)]
    assert report["written"] is False
    assert [row.split(",")[-1] for row in (repo / "r.csv").read_text().splitlines()[1:]] == ["would fix"] * 2
    assert (repo / "src" / "a.py").read_text() == CUDA


def test_fix_write_still_reports_fixed(repo):
    res = invoke("fix", "src", "--write", "--output-format", "concise", "-o", "json:r.json")
    assert "fixed 2 finding(s)" in res.stdout
    report = json.loads((repo / "r.json").read_text())
    assert report["written"] is True and [f["fixed"] for f in report["findings"]] == [True, True]


# -- [tool.torchport] ------------------------------------------------------------------------------------------

def _pyproject(root: Path, body: str) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.torchport]\n" + body)


def test_config_found_from_a_subdirectory_upward(repo, monkeypatch):
    _pyproject(repo, 'ignore = ["TP101"]\n')
    monkeypatch.chdir(repo / "src")
    res = invoke("scan", "--output-format", "concise")
    assert ": TP101" not in res.stdout and "a.py:4:5: TP110" in res.stdout
    res = invoke("scan", "--isolated", "--output-format", "concise")
    assert "a.py:3:5: TP101" in res.stdout


def test_config_select_exclude_per_file_ignores(repo):
    (repo / "gen").mkdir()
    (repo / "gen" / "g.py").write_text(CUDA)
    (repo / "tests").mkdir()
    (repo / "tests" / "t.py").write_text(CUDA)
    _pyproject(repo, 'select = ["TP101"]\nextend-exclude = ["gen/"]\n\n'
                     '[tool.torchport.per-file-ignores]\n"tests/**" = ["TP1"]\n')
    res = invoke("scan", "--output-format", "concise")
    findings = [ln for ln in res.stdout.splitlines() if ": TP" in ln]
    assert findings == ["src/a.py:3:5: TP101 [*] `.cuda()` only targets CUDA devices; use `.to(torchport.device())`"]
    # the command line adds to the file: --select replaces select
    res = invoke("scan", "--select", "TP1", "--output-format", "concise")
    assert sum(": TP" in ln for ln in res.stdout.splitlines()) == 2


def test_this_repository_scans_clean_with_its_own_config(monkeypatch):
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    res = invoke("scan", "src/torchport", "--jobs", "1", "--output-format", "concise")
    assert res.exit_code == 0, res.output
    scanned = int(re.search(r"0 finding\(s\) in 0 file\(s\) of (\d+) scanned", res.stdout).group(1))
    assert scanned > 20, "the config excluded too much"
    assert invoke("scan", "src/torchport", "--isolated", "--jobs", "1").exit_code == 1   # the file is what excludes


def test_config_unsafe_fixes(repo):
    (repo / "src" / "a.py").write_text("from torch.nn.parallel import DistributedDataParallel as DDP\n"
                                       "model = DDP(model, device_ids=[local_rank])\n")   # TP302: an unsafe fix
    _pyproject(repo, "unsafe-fixes = true\n")
    assert "+model = torchport.wrap_ddp(model)" in invoke("fix", "src").stdout
    assert invoke("fix", "src", "--isolated").stdout == ""


def test_config_unknown_key_is_one_usage_line(repo):
    from bad_inputs import bad_input

    from torchport.errors import ExitCode

    _pyproject(repo, 'selct = ["TP1"]\n')
    res = invoke("scan")
    bad_input("scan-config-unknown-key", "an unknown key in [tool.torchport] (pyproject.toml)", "torchport scan",
              res.exit_code, res.stderr, expect_code=ExitCode.USAGE, tmp=repo)
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        f"torchport scan: error: {repo / 'pyproject.toml'}: unknown key 'selct' in [tool.torchport]; "
        "known keys: select, extend-select, ignore, extend-ignore, exclude, extend-exclude, extend-include, per-file-ignores, unsafe-fixes, emit, cache-dir"]


def test_config_wrong_type_and_bad_toml(repo):
    _pyproject(repo, 'ignore = "TP1"\nselect = 3\n')
    res = invoke("scan")
    assert res.exit_code == 2 and "select must be a list of strings" in res.stderr
    (repo / "pyproject.toml").write_text("[tool.torchport\n")
    res = invoke("scan")
    assert res.exit_code == 2 and "not valid TOML" in res.stderr and len(res.stderr.splitlines()) == 1


# -- noqa ------------------------------------------------------------------------------------------------------

def test_line_noqa_and_file_level_noqa(repo):
    a = repo / "src" / "a.py"
    a.write_text(CUDA.replace(".cuda()", ".cuda()  # noqa: TP101"))
    res = invoke("scan", "src", "--output-format", "concise")
    assert ": TP101" not in res.stdout and ":4:5: TP110" in res.stdout
    a.write_text("# torchport: noqa: TP101, TP110\n" + CUDA)
    assert invoke("scan", "src").exit_code == 0
    a.write_text("# torchport: noqa\n" + CUDA)
    assert invoke("scan", "src").exit_code == 0
    a.write_text('"""# torchport: noqa in a docstring"""\n' + CUDA)     # not a comment of its own
    assert invoke("scan", "src").exit_code == 1


def test_file_noqa_parsing():
    from torchport.migrate.runner import file_noqa

    assert file_noqa("x = 1\n") is None
    assert file_noqa("#torchport:noqa\n") == ()
    assert file_noqa("  # torchport: noqa: tp1,TPT201\n") == ("TP1", "TP201")
    assert file_noqa("x = 1  # torchport: noqa\n") is None   # a trailing comment is the line form's business


def test_python_api_honours_the_file_level_noqa():
    from torchport.migrate import fix_source, scan_source

    assert len(scan_source(CUDA).findings) == 2
    assert scan_source("# torchport: noqa: TP101\n" + CUDA).findings[0].code == "TP110"
    assert fix_source("# torchport: noqa\n" + CUDA) == "# torchport: noqa\n" + CUDA


# -- logging, -q / -v, no hard wrap --------------------------------------------------------------------------

def test_library_messages_are_a_logging_tree():
    from torchport import log

    assert log.get_logger("amp") is logging.getLogger("torchport.amp")
    assert logging.getLogger("torchport.amp").parent is logging.getLogger("torchport")
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("torchport").handlers)


def test_global_quiet_and_verbose_set_the_levels():
    root = logging.getLogger("torchport")
    saved = root.level
    try:
        invoke("-q", "rules", "--json", os.devnull)
        assert root.level == logging.ERROR
        invoke("-vv", "rules", "--json", os.devnull)
        assert root.level == logging.DEBUG
        invoke("rules", "--json", os.devnull)
        assert root.level == logging.WARNING
        handlers = [h for h in root.handlers if type(h).__name__ == "CliHandler"]
        assert len(handlers) == 1
    finally:
        root.setLevel(saved)


def test_cli_handler_prints_the_vocabulary(capsys):
    from torchport.log import CliHandler

    logger = logging.getLogger("torchport.test23")
    h = CliHandler()
    logger.addHandler(h)
    logger.propagate = False     # this handler alone (an earlier CLI run attached one to "torchport")
    try:
        logger.warning("torchport shim: no accelerator")
        logger.error("bad %s", "thing")
    finally:
        logger.removeHandler(h)
        logger.propagate = True
    assert capsys.readouterr().err == "torchport: warning: no accelerator\ntorchport: error: bad thing\n"


def test_quiet_silences_torchport_warnings(repo):
    import warnings

    from torchport.cli import main as cli_main

    @cli_main.app.command("_warn23", hidden=True)
    def _warn23() -> None:
        from torchport.runtime.device import CPUFallbackWarning

        warnings.warn("torchport shim: slow", CPUFallbackWarning)

    try:
        cli_main._guard_all(cli_main.app)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            loud = invoke("_warn23")
            quiet = invoke("-q", "_warn23")
    finally:
        cli_main.app.registered_commands.pop()
    assert loud.stderr == "torchport: warning: slow\n"
    assert quiet.stderr == ""


def test_console_does_not_hard_wrap_off_a_terminal():
    from torchport.log import console

    buf = io.StringIO()
    con = console(file=buf)
    con.print("word " * 60)
    assert len(buf.getvalue().strip().splitlines()) == 1


def test_rules_table_is_whole_in_a_pipe():
    from torchport.migrate import catalog

    res = invoke("rules")
    longest = max(catalog.rules(), key=lambda r: len(r.summary))
    assert longest.summary in res.stdout, "a piped table keeps each row on one line"
