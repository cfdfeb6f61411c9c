"""Issue 24: a script that leaves through ``os._exit(N)`` under ``torchport run`` still gets its report
(``-o r.json``) and leaves no temp dir behind; a forked child's ``os._exit`` reports nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _run(tmp_path, script: str, *args):
    (tmp_path / "s.py").write_text(script)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONWARNINGS": "ignore"}
    env.pop("TORCHPORT_DEVICE", None)
    res = subprocess.run([sys.executable, "-m", "torchport", "run", *args, "s.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    return res, tmpdir


def test_os_exit_still_writes_the_report_and_removes_the_temp_dir(tmp_path):
    res, tmpdir = _run(tmp_path, "import os, torch\nx = torch.zeros(2).cuda()\nos._exit(7)\n", "-o", "r.json")
    assert res.returncode == 7, res.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert any("cuda" in json.dumps(r) for r in report["redirects"]), report
    assert list(tmpdir.iterdir()) == []


def test_a_forked_child_os_exit_does_not_report_or_clean_up_for_the_parent(tmp_path):
    script = ("import os, torch\nx = torch.zeros(2).cuda()\npid = os.fork()\n"
              "if pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\ny = torch.ones(1).cuda()\n")
    res, tmpdir = _run(tmp_path, script, "-o", "r.json", "--format", "json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.count('"redirects"') == 1                  # one report, from the parent
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["total_redirects"] == 2, report      # both of the parent's calls counted
    assert list(tmpdir.iterdir()) == []


def test_a_run_killed_outright_leaves_its_temp_dir_only_until_the_next_run(tmp_path):
    res, tmpdir = _run(tmp_path, "import os, signal, torch\nx = torch.zeros(2).cuda()\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert res.returncode == -9 and len(list(tmpdir.iterdir())) == 1      # nothing can clean up after SIGKILL
    (tmp_path / "s.py").write_text("import torch\n")
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONWARNINGS": "ignore"}
    res = subprocess.run([sys.executable, "-m", "torchport", "run", "s.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and list(tmpdir.iterdir()) == []
