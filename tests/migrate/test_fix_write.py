"""`torchport fix --write` never leaves a half-done tree (issue 16 #2).

An unwritable file is one error line; no ``*.torchport-tmp`` is left behind; the other files of a
directory run are still fixed and the summary is printed. A symlink is followed: the target is
fixed and the link stays a link.
"""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from torchport.cli.main import app
from torchport.errors import ExitCode
from torchport.migrate import runner

CUDA = "import torch\n\nmodel = Net().cuda()\n"


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / "pkg" / name).write_text(CUDA)
    return tmp_path / "pkg"


def test_unwritable_file_is_one_line_and_the_rest_is_fixed(tmp_path, monkeypatch):
    pkg = _tree(tmp_path)
    real_replace = os.replace

    def refuse_b(src, dst):     # what a read-only file, directory or filesystem does (root ignores chmod)
        if str(dst).endswith("b.py"):
            raise PermissionError(13, "Permission denied", str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(runner.os, "replace", refuse_b)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["fix", "pkg", "--write", "--jobs", "1"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert res.exit_code == ExitCode.IO, res.output
    assert "torchport" in (pkg / "a.py").read_text() and "torchport" in (pkg / "c.py").read_text()
    assert (pkg / "b.py").read_text() == CUDA                      # untouched, not half-written
    assert not list(pkg.glob("*.torchport-tmp")), "temporary file left behind"
    errors = [ln for ln in res.output.splitlines() if "b.py" in ln and "could not write" in ln]
    assert len(errors) == 1, res.output
    assert "Permission denied" in errors[0]
    from bad_inputs import bad_input

    bad_input("fix-write-unwritable-file", "fix --write on a file that cannot be replaced",
              "torchport fix pkg --write", res.exit_code, res.output, expect_code=ExitCode.IO, tmp=tmp_path,
              contains="could not write")
    assert "of 3 scanned" in res.output and "1 file(s) could not" in res.output, res.output   # the summary


def test_fix_write_follows_a_symlink(tmp_path, monkeypatch):
    real = tmp_path / "real.py"
    real.write_text(CUDA)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["fix", "link.py", "--write", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "torchport" in real.read_text()
    assert not list(tmp_path.glob("*.torchport-tmp"))


def test_fix_write_never_writes_through_a_symlink_out_of_the_tree(tmp_path, monkeypatch):
    """issue 36: a link inside the tree pointing outside it is not followed for writing (one line, exit IO);
    the file it points to is untouched; the tree's own files and in-tree links are still fixed."""
    pkg = _tree(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / "victim.py"
    victim.write_text(CUDA)
    (pkg / "out.py").symlink_to(victim)
    (pkg / "inner.py").symlink_to(pkg / "a.py")          # inside the tree: still fine
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["fix", "pkg", "--write", "--jobs", "1"])
    assert "Traceback" not in res.output
    assert res.exit_code == ExitCode.IO, res.output
    assert victim.read_text() == CUDA, "fix --write wrote outside the tree it was given"
    assert "torchport" in (pkg / "b.py").read_text() and "torchport" in (pkg / "a.py").read_text()
    lines = [ln for ln in res.output.splitlines() if "out.py" in ln and "outside the tree" in ln]
    assert len(lines) == 1 and str(victim) in lines[0], res.output
    assert runner.outside_roots(str(pkg / "inner.py"), runner.tree_roots(["pkg"])) is None
