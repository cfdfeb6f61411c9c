"""Graceful stop: seconds from SIGTERM / SIGINT to the exit of ``torchport train``, and what it left behind.

A tiny run (tinycnn, 32 px, 2 DataLoader workers, 0.2 s pause per step) gets the signal after step 5
(SIGINT to the whole process group, as a terminal's Ctrl-C). Printed per signal: the exit code, the
seconds until the process is gone (step finished, checkpoint, summary, curves, workers stopped,
interpreter exit), the traceback count on stderr (must be 0), the files of the run dir, and
whether the printed resume command continues the run (exit 0) with the same per-step losses as an
uninterrupted run (baseline: that run, measured in the same invocation).

Usage::

    python benchmarks/bench_stop.py                 # makes a small synthetic dataset in a temp dir
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


FAULT_TRAIN = Path(__file__).resolve().parents[1] / "tests" / "train" / "fault_train.py"   # train + a step delay


def _cmd(data: Path, run_dir: Path) -> list[str]:
    return [sys.executable, str(FAULT_TRAIN), "--data", str(data), "--model", "tinycnn", "--image-size", "32",
            "--batch-size", "8", "--warmup-epochs", "0", "--progress", "plain", "--epochs", "2", "--log-every", "1",
            "--workers", "2", "--run-dir", str(run_dir)]


def _losses(run_dir: Path) -> dict[int, float]:
    out = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "step":
            out[r["step"]] = r["loss"]
    return out


def main() -> int:
    from torchport.data.synth import make_dataset

    tmp = Path(tempfile.mkdtemp(prefix="torchport-bench-stop-"))
    data = tmp / "data"
    make_dataset(data, classes=4, train_per_class=24, val_per_class=8, size=32)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCHPORT_CACHE": str(tmp / "cache")}
    ref = subprocess.run(_cmd(data, tmp / "ref"), env=env, capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr
    expected = _losses(tmp / "ref")
    for name in ("SIGTERM", "SIGINT"):
        sig, run_dir = getattr(signal, name), tmp / name
        p = subprocess.Popen(_cmd(data, run_dir), env={**env, "TORCHPORT_FAULT_STEP_DELAY_S": "0.2"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        metrics = run_dir / "metrics.jsonl"
        while not (metrics.exists() and max(_losses(run_dir), default=0) >= 5):
            time.sleep(0.02)
        t0 = time.time()
        os.killpg(p.pid, sig) if sig == signal.SIGINT else p.send_signal(sig)
        _, err = p.communicate()
        seconds = time.time() - t0
        last = err.strip().splitlines()[-1]
        files = sorted(x.name for x in run_dir.iterdir() if not x.name.startswith("."))
        command = shlex.split(last.split("resume with: ", 1)[1])
        resumed = subprocess.run([sys.executable, "-m", "torchport.train", *command[2:]], env=env,
                                 capture_output=True, text=True)
        print(f"{name}: exit {p.returncode}, {seconds:.2f} s after the signal, {err.count('Traceback')} tracebacks; "
              f"files {files}; resume exit "
              f"{resumed.returncode}, per-step losses equal to the uninterrupted run: {_losses(run_dir) == expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
