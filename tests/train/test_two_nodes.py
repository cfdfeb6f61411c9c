"""Two `torchrun --nnodes 2` processes on one machine (issue 16 #8): both exit 0 and print no
QueueFeederThread / worker-shutdown tracebacks; the fast loader's workers are shut down explicitly."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys

import pytest

from torchport.data import make_loader
from torchport.runtime.device import select_device

NOISE = ("Traceback", "QueueFeederThread", "Bad file descriptor", "semaphore or lock released too many times",
         "Exception in thread", "leaked semaphore")


def _ours(out: str) -> str:
    """The output without torchrun's own agent log of its exit-barrier race (pytorch/pytorch#69520, open: node 0's
    agent closes the store it hosts while node 1's agent still waits in the exit barrier; the job succeeded, and the
    lines are torch's, tagged with the agent's source file), which this test does not judge."""
    return "\n".join(line for line in out.splitlines()
                     if "elastic/agent/server/api.py" not in line and "TCPStore.cpp" not in line
                     and not line.startswith(("Exception raised from recvBytes", "frame #", "<omitting python frames>")))


def test_fast_loader_close_stops_workers_mid_epoch(tiny_data):
    loader = make_loader(tiny_data, batch_size=4, train=True, image_size=16, num_workers=2,
                         target=select_device("cpu", warn=False))
    loader.set_epoch(0)
    for _ in loader:          # leave the epoch after one batch: prefetching workers are still busy
        break
    assert multiprocessing.active_children()
    loader.close()
    assert not multiprocessing.active_children(), "loader workers still running after close()"
    loader.close()            # twice is fine
    loader.set_epoch(1)
    n = len(loader)
    assert n > 1 and sum(1 for _ in loader) == n          # usable again, with fresh workers
    loader.close()
    assert not multiprocessing.active_children()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_node_torchrun_one_step_per_epoch_exits_cleanly(tiny_data, tmp_path, env):
    port = _free_port()
    procs = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
               "-m", "torchport", "train", "--data", str(tiny_data), "--epochs", "2", "--max-steps", "2",
               "--batch-size", "48", "--image-size", "16", "--model", "tinycnn", "--device", "cpu",
               "--workers", "2", "--run-dir", str(tmp_path / "run"), "--progress", "plain"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      env={**env, "PYTHONWARNINGS": "default"}, cwd=tmp_path))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("two-node run did not finish in 240 s")
    for node, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"node {node} exit {p.returncode}:\n{out[-3000:]}"
        noise = [n for n in NOISE if n in _ours(out)]
        assert not noise, f"node {node} printed {noise}:\n{out[-4000:]}"
    assert "1 steps/epoch" in outs[0], outs[0][-2000:]
