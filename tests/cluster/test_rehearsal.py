"""The multi-node rehearsal on one machine (issue 33 #1, #2): two loopback "nodes" of one rank each, run
through ``torchport launch`` (the kubeflow environment), train like one node of two ranks; a node that never
arrives and an unreachable rendezvous endpoint are one line (exit 8), not a hang.
The full matrix (2x2, 3x2, emulated npu, fsdp, node loss) is benchmarks/cluster_rehearsal.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torchport.cluster.rehearsal import Rehearsal, max_abs_diff, step_losses

#: Per-step loss tolerance, 2 nodes x 1 rank vs 1 node x 2 ranks: the same ranks, the same gloo sums (exact).
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from torchport.data.synth import make_dataset

    root = tmp_path_factory.mktemp("cluster") / "shapes"
    make_dataset(root, classes=4, train_per_class=12, val_per_class=4, size=16)
    return root


def _env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_") or k.startswith("TORCHPORT_CPU_")}
    e.update({"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "TORCHPORT_CACHE": str(tmp_path / "cache")})
    return e


def _train(data, run_dir):
    return ["train", "--data", str(data), "--model", "tinycnn", "--image-size", "16", "--batch-size", "8",
            "--lr", "0.02", "--warmup-epochs", "0", "--epochs", "1", "--workers", "0", "--log-every", "1",
            "--device", "cpu", "--precision", "fp32", "--progress", "plain", "--run-dir", str(run_dir)]


def test_two_nodes_of_one_rank_train_like_one_node_of_two(data, tmp_path):
    env = _env(tmp_path)
    with Rehearsal(nnodes=2, nproc=1, workdir=tmp_path / "nodes", join_timeout=60, env=env) as rh:
        rh.start(_train(data, tmp_path / "two-nodes"))
        results = rh.wait(timeout=150)
    for r in results:
        assert r.returncode == 0, f"node {r.rank} exit {r.returncode}:\n{r.output[-3000:]}"
    assert "world size 2" in results[0].output and "3 steps/epoch" in results[0].output
    # each node had a cache of its own, and node 1's ranks wrote no run directory of their own
    assert {p.name for p in (tmp_path / "nodes").iterdir() if p.is_dir()} == {"node0", "node1"}
    ref = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "torchport", *_train(data, tmp_path / "one-node")], env=env, capture_output=True,
                         text=True, timeout=150)
    assert ref.returncode == 0, ref.stderr[-3000:]
    two, one = step_losses(tmp_path / "two-nodes"), step_losses(tmp_path / "one-node")
    assert sorted(two) == [1, 2, 3]
    assert max_abs_diff(two, one) <= TOLERANCE, (two, one)


def test_a_node_that_never_arrives_is_one_line_after_the_join_timeout(data, tmp_path):
    with Rehearsal(nnodes=2, workdir=tmp_path / "nodes", join_timeout=3, env=_env(tmp_path)) as rh:
        rh.start(_train(data, tmp_path / "run"), ranks=[0])        # node 1 never starts
        [node0] = rh.wait(timeout=90)
    assert node0.returncode == 8, node0.output[-3000:]
    last = node0.output.strip().splitlines()[-1]
    assert last.startswith("torchport launch: error: node 0 of 2") and "not all of them joined within 3 s" in last


def test_an_unreachable_rendezvous_endpoint_is_one_line(data, tmp_path):
    # node 1 alone: node 0, which hosts the store, is not running, so nothing listens at the endpoint
    with Rehearsal(nnodes=2, workdir=tmp_path / "nodes", join_timeout=3, connect_timeout=3, env=_env(tmp_path)) as rh:
        rh.start(_train(data, tmp_path / "run"), ranks=[1])
        [node1] = rh.wait(timeout=90)
    assert node1.returncode == 8, node1.output[-3000:]
    last = node1.output.strip().splitlines()[-1]
    assert "cannot reach the rendezvous endpoint 127.0.0.1:" in last and "(PET_MASTER_ADDR)" in last
