"""Issue 24: a malformed TORCHPORT_EMULATE is one line and exit 2 in every verb -- never torch's autoload
traceback (exit 1) from `doctor`, nor a SIGSEGV from `train`. Fresh processes: the bad value must be
seen at interpreter start, where torch's device-backend autoload reads it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bad_inputs import bad_input
from torchport.errors import ExitCode


def _torchport(*args, emulate):
    env = {**os.environ, "TORCHPORT_EMULATE": emulate, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "torchport", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("value,row", [("npu:0", "emulate-env-zero"), ("npu:-1", "emulate-env-negative"),
                                       ("npu:abc", "emulate-env-not-a-number"), ("gpu", "emulate-env-not-npu")])
def test_bad_emulate_value_is_one_line_exit_2_in_doctor(value, row):
    res = _torchport("doctor", emulate=value)
    bad_input(row, f"TORCHPORT_EMULATE={value}", f"TORCHPORT_EMULATE={value} torchport doctor", res.returncode,
              res.stderr, expect_code=ExitCode.USAGE, contains="TORCHPORT_EMULATE")


def test_bad_emulate_value_stops_train_before_any_work(tmp_path):
    res = _torchport("train", "--epochs", "1", "--run-dir", str(tmp_path / "run"), emulate="npu:0")
    assert res.returncode == ExitCode.USAGE, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "TORCHPORT_EMULATE='npu:0'" in res.stderr
    assert not (tmp_path / "run").exists()


def test_bad_emulate_value_raises_from_import_torch_and_the_process_goes_on():
    """Library code raises: `import torch` fails with torchport's one-line error as the cause, and the
    interpreter (a notebook kernel, a test runner) keeps running -- no exit from inside an import."""
    code = ("try:\n    import torch\nexcept RuntimeError as exc:\n    print('cause:', type(exc.__cause__).__name__,"
            " exc.__cause__)\nprint('alive')\n")
    env = {**os.environ, "TORCHPORT_EMULATE": "npu:abc"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "cause: EmulateError TORCHPORT_EMULATE=npu:abc" in res.stdout and "alive" in res.stdout
