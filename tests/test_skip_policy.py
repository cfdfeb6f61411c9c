"""The CI skip policy: the skip count is printed; a skip not on tests/skip_allowlist.txt fails --strict-skips."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clean_env import clean_env

HERE = Path(__file__).resolve().parent


def _run(tmp_path, body: str, *args: str) -> subprocess.CompletedProcess:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(HERE / "skip_allowlist.txt", tmp_path / "skip_allowlist.txt")
    (tmp_path / "test_inner.py").write_text(body)
    env = clean_env()
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:torchport", *args, "test_inner.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_unlisted_skip_fails_strict_runs_and_is_counted(tmp_path):
    body = "import pytest\n\ndef test_ok():\n    pass\n\ndef test_hidden():\n    pytest.skip('not built yet')\n"
    lenient = _run(tmp_path, body)
    assert lenient.returncode == 0 and "skips: 1 (0 on tests/skip_allowlist.txt, 1 not)" in lenient.stdout, lenient.stdout
    strict = _run(tmp_path, body, "--strict-skips")
    assert strict.returncode == 1, strict.stdout
    assert "NOT ALLOWED: test_inner.py::test_hidden: not built yet" in strict.stdout


def test_a_skip_on_an_xdist_worker_is_counted_and_fails_strict_runs(tmp_path):
    """CI runs the suite with ``-n auto``: a skip on a worker must reach the count like one in-process."""
    body = "import pytest\n\ndef test_ok():\n    pass\n\ndef test_hidden():\n    pytest.skip('not built yet')\n"
    strict = _run(tmp_path, body, "--strict-skips", "-n", "2")
    assert strict.returncode == 1, strict.stdout
    assert "skips: 1 (0 on tests/skip_allowlist.txt, 1 not)" in strict.stdout, strict.stdout
    assert "NOT ALLOWED: test_inner.py::test_hidden: not built yet" in strict.stdout


def test_allowlisted_skip_passes_strict_runs(tmp_path):
    body = ("import pytest\n\n@pytest.mark.parametrize('d', ['cpu', 'cuda'])\ndef test_dev(d):\n"
            "    if d == 'cuda':\n        pytest.skip('cuda is not available here')\n")
    strict = _run(tmp_path, body, "--strict-skips")
    assert strict.returncode == 0, strict.stdout
    assert "skips: 1 (1 on tests/skip_allowlist.txt, 0 not)" in strict.stdout


def test_allowlist_entries_are_documented(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("tests_root_conftest", HERE / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    load_skip_allowlist = mod.load_skip_allowlist

    rows = load_skip_allowlist()
    assert rows and all(len(why) > 15 for _, _, why in rows)
    assert len(rows) <= 8, "keep the skip allow-list minimal"
    bad = tmp_path / "bad_allowlist.txt"
    bad.write_text("tests/x.py::* | no reason given\n")
    with pytest.raises(ValueError, match="expected"):
        load_skip_allowlist(str(bad))
