"""Issue 24: `fix --write` never loses an edit nor "succeeds" twice, and a file that crashes the parser
costs one line for that file -- every other file is still scanned and written, with a report.

The native-crash cases inject the crash (a worker that dies as LibCST's stack overflow makes it die) so
the test does not spend minutes inside LibCST; the 5,000-bracket file is the real one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from bad_inputs import bad_input
from torchport.errors import ExitCode
from torchport.migrate import engine, runner

CUDA = 'import torch\nx = torch.randn(3).cuda()\ny = torch.device("cuda")\n'


def _tree(root, n):
    root.mkdir()
    for i in range(n):
        (root / f"f{i:02d}.py").write_text(CUDA)
    return sorted(root.glob("*.py"))


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "torchport", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_5000_nested_brackets_is_one_line_and_the_other_files_are_scanned(tmp_path):
    files = _tree(tmp_path / "src", 2)
    (tmp_path / "src" / "deep.py").write_text("import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    res = _cli("scan", "src", cwd=tmp_path)
    bad_input("scan-5000-nested-brackets", "a .py file with 5,000 nested parentheses", "torchport scan src",
              res.returncode, res.stdout + res.stderr, expect_code=ExitCode.IO, tmp=tmp_path,
              contains="too deeply nested")
    assert f"{len(files) * 2} finding(s) in {len(files)} file(s)" in res.stdout


def test_brackets_inside_strings_do_not_refuse_a_valid_file():
    assert runner.nesting_problem("x = '" + "(" * 5000 + "'\n") is None
    assert runner.nesting_problem("x = " + "(" * 150 + "1" + ")" * 150) is None
    assert "201 levels" in runner.nesting_problem("x = " + "[" * 201 + "]" * 201)


def _crash_on_marker(monkeypatch):
    real = engine.analyze

    def analyze(source, *a, **k):
        if "CRASH_ME" in source:
            os.kill(os.getpid(), signal.SIGSEGV)      # what LibCST's stack overflow does to the process
        return real(source, *a, **k)

    monkeypatch.setattr(engine, "analyze", analyze)


def test_a_worker_crash_costs_one_file_and_fix_write_still_reports_every_file(tmp_path, monkeypatch):
    files = _tree(tmp_path / "src", 20)
    files[7].write_text(CUDA + "CRASH_ME = 1\n")
    _crash_on_marker(monkeypatch)
    report = runner.run([tmp_path / "src"], runner.Options(write=True, jobs=2))
    assert [e.path for e in report.errors] == [str(files[7])]
    assert "crashed" in report.errors[0].message
    assert files[7].read_text() == CUDA + "CRASH_ME = 1\n"                       # untouched
    assert all("cuda()" not in f.read_text() for f in files if f != files[7])    # the 19 others fixed


def test_a_long_generated_line_is_parsed_out_of_process(tmp_path, monkeypatch):
    src = tmp_path / "gen.py"
    src.write_text(CUDA + "CRASH_ME = [" + "1, " * 4000 + "]\n")
    ok = tmp_path / "ok.py"
    ok.write_text(CUDA)
    _crash_on_marker(monkeypatch)
    report = runner.run([src, ok], runner.Options(jobs=1))    # the in-process path: this process survives
    assert [e.path for e in report.errors] == [str(src)] and "crashed" in report.errors[0].message
    assert {f.path for f in report.findings} == {str(ok)}


def test_fix_write_refuses_a_file_edited_while_it_was_analysed(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text(CUDA)
    real = engine.analyze

    def analyze_while_user_edits(source, *a, **k):
        result = real(source, *a, **k)
        path.write_text(CUDA + "# the user's edit, saved meanwhile\n")
        return result

    monkeypatch.setattr(engine, "analyze", analyze_while_user_edits)
    report = runner.run([path], runner.Options(write=True, jobs=1))
    assert path.read_text().endswith("# the user's edit, saved meanwhile\n")       # the edit survives
    assert len(report.errors) == 1 and "changed since it was read" in report.errors[0].message
    assert not [p for p in tmp_path.iterdir() if p.name != "train.py"]            # no temp file left


def test_two_concurrent_fix_write_runs_leave_no_file_cuda_only(tmp_path):
    files = _tree(tmp_path / "src", 30)
    procs = [subprocess.Popen([sys.executable, "-m", "torchport", "fix", "--write", "--format", "json", "src"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"}) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    left = [f.name for f in files if "cuda()" in f.read_text()]
    assert not left, (left, codes, [o[1][-500:] for o in outs])
    assert set(codes) <= {0, int(ExitCode.IO)}, (codes, outs)
    for code, (out, err) in zip(codes, outs):     # a run that lost a race says so, and exits non-zero
        assert ("changed since it was read" in out + err) == (code == ExitCode.IO), (code, out[-800:], err[-800:])
    assert not [p.name for p in (tmp_path / "src").iterdir() if not p.name.endswith(".py")]


def test_broken_py_links_in_a_tree_are_reported_and_the_walk_goes_on(tmp_path):
    files = _tree(tmp_path / "src", 2)
    os.symlink("loop.py", tmp_path / "src" / "loop.py")                 # a link to itself (ELOOP)
    os.symlink(tmp_path / "gone.py", tmp_path / "src" / "gone.py")      # target missing
    report = runner.run([tmp_path / "src"], runner.Options(jobs=1))
    errors = {os.path.basename(e.path): e.message for e in report.errors}
    assert set(errors) == {"loop.py", "gone.py"}, errors
    assert "Too many levels of symbolic links" in errors["loop.py"] and "No such file" in errors["gone.py"]
    assert {f.path for f in report.findings} == {str(f) for f in files}
