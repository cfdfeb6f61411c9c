"""`torchport bench` on the emulated npu: memory is counted, and AMP's peak is below FP32's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from torchport.bench.amp_bench import BenchConfig, run_bench
from torchport.workload import from_preset


def _tiny(**kw):
    workload, p = from_preset("tiny")
    return BenchConfig(workload=workload, windows=kw.pop("windows", 2), steps_per_window=kw.pop("steps", 1),
                       warmup=kw.pop("warmup", 1), **kw)


def test_amp_peak_memory_below_fp32_on_emulated_npu(emulated_npu):
    report = run_bench(_tiny())
    assert report.device_type == "npu" and report.emulated and report.backend == "npu (emulated)"
    fp32, amp = report.results["fp32"], report.results["amp"]
    assert amp.precision in ("bf16", "fp16")  # the npu AMP policy, not cpu's
    assert fp32.peak_memory_bytes and amp.peak_memory_bytes  # the emulator counts live-tensor bytes
    assert amp.peak_memory_bytes < fp32.peak_memory_bytes
    assert report.memory_change < -0.1
    # the peak is the training step's, not a leftover of the previous precision
    assert fp32.baseline_memory_bytes == amp.baseline_memory_bytes


@pytest.mark.emulated_npu(devices=1)
def test_fp16_with_loss_scaling_on_emulated_npu(emulated_npu):
    report = run_bench(_tiny(precisions=("fp32", "fp16"), windows=1))
    res = report.results["fp16"]
    assert res.precision == "fp16" and res.images_per_s > 0
    assert res.peak_memory_bytes < report.results["fp32"].peak_memory_bytes


def test_cli_with_torchport_emulate_env(tmp_path):
    """`TORCHPORT_EMULATE=npu torchport bench` selects the emulated npu with no code change."""
    out = tmp_path / "npu.json"
    env = {**os.environ, "TORCHPORT_EMULATE": "npu", "OMP_NUM_THREADS": "1"}
    env.pop("TORCHPORT_DEVICE", None)
    cmd = [sys.executable, "-X", "faulthandler", "-m", "torchport.cli.main", "bench", "--preset", "tiny",
           "--windows", "1", "--steps-per-window", "1", "--warmup", "1", "-q", "--json", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        stdout, stderr = proc.communicate()
        pytest.fail(f"`torchport bench` under TORCHPORT_EMULATE=npu hung; stacks:\n{stderr[-6000:]}")
    assert proc.returncode == 0, stdout + stderr
    data = json.loads(out.read_text())
    assert data["device"] == "npu (emulated):0" and data["emulated"] is True
    assert data["results"]["amp"]["peak_memory_bytes"] < data["results"]["fp32"]["peak_memory_bytes"]
    assert "throughput" in stdout
