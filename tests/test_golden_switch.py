"""A TORCHPORT_UPDATE_GOLDEN left in the environment must not turn golden comparisons into rewrites."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_update_golden_env_is_cleared_unless_the_option_is_given(tmp_path):
    probe = tmp_path / "test_probe.py"
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    env = {**os.environ, "TORCHPORT_UPDATE_GOLDEN": "1"}          # left over in the developer's shell
    code = "import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))"
    probe.write_text("import os\n\ndef test_env():\n    assert repr(os.environ.get('TORCHPORT_UPDATE_GOLDEN')) == os.environ['EXPECT']\n")
    plain = subprocess.run([sys.executable, "-c", code, "-q", "-p", "no:cacheprovider", str(probe)], cwd=tmp_path,
                           env={**env, "EXPECT": "None"}, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    update = subprocess.run([sys.executable, "-c", code, "-q", "-p", "no:cacheprovider", "--update-golden", str(probe)],
                            cwd=tmp_path, env={**env, "EXPECT": "'1'"}, capture_output=True, text=True, timeout=120)
    assert update.returncode == 0, update.stdout + update.stderr
