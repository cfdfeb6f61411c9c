"""Graceful stop on real signals at random moments, exact resume, and one writer per run (issue 24 #4, #5).

SIGTERM (what ``timeout``, Kubernetes and Slurm send) and SIGINT (Ctrl-C: sent to the whole process
group, DataLoader workers included) must end ``torchport train`` with a checkpoint, ``summary.json``,
``curves.png``, the exact resume command and exit 143 / 130 -- and the resumed run must produce the same
loss at every step as a run that was never interrupted. A second trainer on the same run dir refuses.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time

import pytest
from train_helpers import TINY, fault_cmd, records, run, step_losses, train_cmd

from torchport.errors import ExitCode
from clean_env import clean_env

ARGS = ["--epochs", "2", "--log-every", "1", "--workers", "1", "--keep-last", "2"]


@pytest.fixture(scope="module")
def reference(tiny_data, tmp_path_factory):
    """Per-step losses of the uninterrupted run (24 steps)."""
    tmp = tmp_path_factory.mktemp("ref")
    env = clean_env()
    env.update({"TORCHPORT_CACHE": str(tmp / "cache"), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    out = run(train_cmd("--data", tiny_data, *TINY, *ARGS, "--run-dir", tmp / "run"), env, timeout=400)
    assert out.returncode == 0, out.stderr
    losses = step_losses(tmp / "run")
    assert sorted(losses) == list(range(1, 25))
    return losses


def _wait_for_step(run_dir, proc, k, timeout=300.0) -> bool:
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            if (run_dir / "metrics.jsonl").exists() and max(step_losses(run_dir), default=0) >= k:
                return True
        except ValueError:   # a line being written right now
            pass
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_at_a_random_step_stops_cleanly_and_resumes_exactly(tiny_data, env, tmp_path, reference, sig):
    seed = int(os.environ.get("TORCHPORT_TEST_STOP_SEED") or random.SystemRandom().randrange(1 << 30))
    k = random.Random(seed).randrange(1, 22)          # the moment: after step k (of 24), either epoch
    why = f"(signal after step {k}; reproduce with TORCHPORT_TEST_STOP_SEED={seed})"
    run_dir = tmp_path / "run"
    # its own session: SIGINT goes to the process group, as a terminal's Ctrl-C does (workers get it too)
    delay = "0.5" if sig == signal.SIGTERM else "0.15"     # SIGTERM: long enough for a second trainer to try
    cmd = fault_cmd("--data", tiny_data, *TINY, *ARGS, "--run-dir", run_dir, "--json", tmp_path / "s.json")
    proc = subprocess.Popen(cmd,
                            env={**env, "TORCHPORT_FAULT_STEP_DELAY_S": delay}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if sig == signal.SIGTERM:
            # meanwhile a second trainer on the same run dir refuses in one line (one writer per run)
            assert _wait_for_step(run_dir, proc, 1), proc.stderr.read()
            second = run(train_cmd("--data", tiny_data, *TINY, *ARGS, "--run-dir", run_dir, "--resume", "auto"), env)
            assert proc.poll() is None, "the first trainer ended before the second one tried"
            assert second.returncode == ExitCode.BUSY, second.stderr
            line = second.stderr.strip().splitlines()[-1]
            assert f"is in use by another trainer (pid {proc.pid} on" in line and "Traceback" not in second.stderr
        reached = _wait_for_step(run_dir, proc, k)
        if sig == signal.SIGTERM:
            proc.send_signal(sig)
        else:
            os.killpg(proc.pid, sig)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert reached, f"{why}\n{proc.stderr.read() if proc.stderr else ''}"
    code = ExitCode.TERMINATED if sig == signal.SIGTERM else ExitCode.INTERRUPTED
    assert proc.returncode == code, f"{why} exit {proc.returncode}\n{stderr}"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, f"{why}\n{stderr}"
    last = stderr.strip().splitlines()[-1]
    assert f"stopped by {signal.Signals(sig).name}" in last and "resume with: torchport train --config" in last, last
    assert f"{signal.Signals(sig).name}: stopping after this step" in stdout
    # the wrap-up was written: summary, curves, the stopped record naming the checkpoint
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] >= k and summary["last_checkpoint"], why
    assert summary["stopped"] == signal.Signals(sig).name and "done:" not in stdout    # not reported as done
    assert json.loads((tmp_path / "s.json").read_text()) == summary                   # --json written as well
    assert f"stopped by {signal.Signals(sig).name} at step {summary['steps']}:" in stdout
    assert (run_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stopped = records(run_dir, "stopped")
    assert stopped and stopped[-1]["signal"] == signal.Signals(sig).name
    assert not (run_dir / ".torchport.owner.json").exists()          # the writer lock was released

    # the printed command, as printed, continues the run; every step's loss equals the uninterrupted run's
    command = shlex.split(last.split("resume with: ", 1)[1])
    assert command[:2] == ["torchport", "train"]
    resumed = run([sys.executable, "-m", "torchport.train", *command[2:]], env, timeout=400)
    assert resumed.returncode == 0, f"{why}\n{resumed.stderr}"
    assert step_losses(run_dir) == reference, why


@pytest.mark.parametrize("held", ["run dir", "checkpoint dir"])
def test_an_outside_holder_of_the_run_dir_is_named(tiny_data, env, tmp_path, held):
    """The lock is an OS file lock: a process holding it (here this test) makes the trainer refuse at once --
    on the run dir, or on a checkpoint dir outside it shared by two runs."""
    from torchport.train import lock

    run_dir, ckdir = tmp_path / "run", tmp_path / "shared-ckpt"
    lock.acquire(run_dir if held == "run dir" else ckdir)
    try:
        out = run(train_cmd("--data", tiny_data, *TINY, "--run-dir", run_dir, "--checkpoint-dir", ckdir), env)
    finally:
        lock.release_all()
    assert out.returncode == ExitCode.BUSY, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert f"{run_dir if held == 'run dir' else ckdir} is in use by another trainer (pid {os.getpid()} on" in line
    assert "Traceback" not in out.stderr
    assert not (run_dir / "metrics.jsonl").exists() and not (run_dir / "config.yaml").exists()   # nothing written


def test_a_second_signal_abandons_the_step_and_keeps_the_last_checkpoint(tiny_data, env, tmp_path):
    from torchport.runtime import checkpoint as ckpt

    run_dir = tmp_path / "run"
    cmd = fault_cmd("--data", tiny_data, *TINY, *ARGS, "--checkpoint-every", "2", "--run-dir", run_dir)
    proc = subprocess.Popen(cmd,
                            env={**env, "TORCHPORT_FAULT_STEP_DELAY_S": "1.0"}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        reached = _wait_for_step(run_dir, proc, 3)      # the step-2 checkpoint exists; step 4 is in its 1 s pause
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert reached and proc.returncode == ExitCode.INTERRUPTED, stderr
    last = stderr.strip().splitlines()[-1]
    assert "SIGINT again: step abandoned; the last checkpoint written is kept; resume with: torchport train" in last
    assert "Traceback" not in stderr
    latest = ckpt.CheckpointManager(run_dir / "checkpoints").latest()
    assert latest is not None and ckpt.load(latest)["progress"]["step"] in (2, 4)
