"""The multi-node rehearsal on one machine (issue 33 #1, #2): two "nodes" of one rank each, on loopback and in
network namespaces of their own, run through ``torchport launch`` (the kubeflow environment), train like one node
of two ranks; the namespaces leave nothing behind; a node that never arrives and an unreachable rendezvous
endpoint are one line (exit 8), not a hang.
The full matrix (2x2, 3x2, emulated npu, fsdp, node loss) is benchmarks/bench_cluster.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from torchport.cluster import netns
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


@pytest.fixture(scope="module")
def one_node(data, tmp_path_factory):
    """Per-step losses of the reference: one node of two ranks (torchrun --standalone)."""
    tmp = tmp_path_factory.mktemp("one-node")
    ref = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "torchport", *_train(data, tmp / "run")], env=_env(tmp), capture_output=True,
                         text=True, timeout=150)
    assert ref.returncode == 0, ref.stderr[-3000:]
    losses = step_losses(tmp / "run")
    assert sorted(losses) == [1, 2, 3]
    return losses


def _two_nodes(data, tmp_path, net):
    with Rehearsal(nnodes=2, nproc=1, workdir=tmp_path / "nodes", join_timeout=60, env=_env(tmp_path), net=net) as rh:
        rh.start(_train(data, tmp_path / "two-nodes"))
        results = rh.wait(timeout=150)
    for r in results:
        assert r.returncode == 0, f"node {r.rank} exit {r.returncode}:\n{r.output[-3000:]}"
    assert "world size 2" in results[0].output and "3 steps/epoch" in results[0].output
    # each node had a cache of its own, and node 1's ranks wrote no run directory of their own
    assert {p.name for p in (tmp_path / "nodes").iterdir() if p.is_dir()} == {"node0", "node1"}
    return rh, step_losses(tmp_path / "two-nodes")


def test_two_nodes_of_one_rank_train_like_one_node_of_two(data, one_node, tmp_path):
    rh, two = _two_nodes(data, tmp_path, "loopback")
    assert rh.net == "loopback" and rh.node_env(1)["TORCHPORT_NODE_ADDR"] == "127.0.0.2"
    assert max_abs_diff(two, one_node) <= TOLERANCE, (two, one_node)


def _root_net() -> dict[str, str]:
    """The root namespace's links, addresses and routes, and this process's rehearsal namespaces."""
    def ip(*a):
        return subprocess.run(["ip", *a], capture_output=True, text=True, timeout=30).stdout
    mine = [n for n in netns.list_namespaces() if n.startswith(f"{netns.PREFIX}{os.getpid()}x")]
    return {"link": ip("-o", "link"), "addr": ip("-o", "addr"), "route": ip("route"), "netns": " ".join(mine)}


def test_two_nodes_in_network_namespaces_train_like_one_node_and_leave_nothing_behind(data, one_node, tmp_path):
    why = netns.unavailable()
    before = _root_net() if why is None else None
    rh, two = _two_nodes(data, tmp_path, "netns")
    if why is not None:        # not root / no ip here: the rehearsal said so and ran on loopback
        assert rh.net == "loopback" and why in rh.net_note and "127.0.0.x" in rh.net_note
    else:
        assert rh.net == "netns" and rh.netns.names == []      # closed
        env1 = rh.node_env(1)
        # node 1 reached node 0 at its namespace address, over the namespace's own interface (gloo binds tpnet0,
        # which the root namespace does not have: a node run outside its namespace would fail)
        assert env1["PET_MASTER_ADDR"] == env1["MASTER_ADDR"] == rh.address(0) and rh.address(0).startswith("10.213.")
        assert env1["HCCL_IF_IP"] == env1["TORCHPORT_NODE_ADDR"] == rh.address(1) != rh.address(0)
        assert env1["GLOO_SOCKET_IFNAME"] == netns.IFNAME
        assert rh.command(1, ["train"])[:4] == ["ip", "netns", "exec", f"{netns.PREFIX}{rh.netns.tag}-n1"]
        assert _root_net() == before
    assert max_abs_diff(two, one_node) <= TOLERANCE, (two, one_node)


def test_namespaces_unavailable_fall_back_to_loopback_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(netns, "unavailable", lambda: "not root (ip netns needs CAP_SYS_ADMIN)")
    with Rehearsal(nnodes=2, workdir=tmp_path, net="netns") as rh:
        assert rh.net == "loopback" and rh.netns is None and rh.address(1) == "127.0.0.2"
        assert rh.command(0, ["train"])[0] == sys.executable
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["torchport rehearsal: warning: network namespaces unavailable (not root (ip netns needs CAP_SYS_ADMIN)); "
                   "the 2 nodes use loopback addresses 127.0.0.x instead"]


def test_stale_rehearsal_namespaces_are_removed_by_prefix():
    if netns.unavailable() is not None:       # nothing can be made here: nothing to clean
        assert netns.cleanup_stale() == []
        return
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, live = f"{netns.PREFIX}{dead.pid}x0-br", f"{netns.PREFIX}{os.getpid()}x999-br"
    for name in (stale, live):
        subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        assert stale in netns.cleanup_stale()
        left = netns.list_namespaces()
        assert stale not in left and live in left          # a running rehearsal's namespaces are kept
    finally:
        for name in (stale, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


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


def test_closing_the_namespaces_kills_what_still_runs_inside():
    """A worker orphaned by its launcher keeps running in a deleted namespace; close() kills it first."""
    if netns.unavailable() is not None:       # nothing can be made here: nothing can run inside one
        assert netns.kill_inside(f"{netns.PREFIX}0x0-n0") == []
        return
    spaces = netns.create(1)
    orphan = subprocess.Popen(["ip", "netns", "exec", spaces.node_ns(0), "sleep", "120"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not subprocess.run(["ip", "netns", "pids", spaces.node_ns(0)], capture_output=True,
                                 text=True).stdout.split() and time.monotonic() < deadline:
            time.sleep(0.05)
        spaces.close()
        assert orphan.wait(timeout=10) == -9
        assert not [n for n in netns.list_namespaces() if n.startswith(f"{netns.PREFIX}{spaces.tag}-")]
    finally:
        if orphan.poll() is None:
            orphan.kill()
        spaces.close()


def test_a_master_addr_that_routes_nowhere_is_one_line_not_a_hang(data, tmp_path):
    # in the namespaces an address of the node's /24 that no node has gets no ARP answer: nothing ever refuses,
    # the connect just never completes -- the connect timeout bounds it (loopback can only show a refusal)
    if netns.unavailable() is not None:
        pytest.fail(f"network namespaces unavailable here: {netns.unavailable()}")
    with Rehearsal(nnodes=2, workdir=tmp_path / "nodes", join_timeout=3, connect_timeout=3, env=_env(tmp_path),
                   net="netns") as rh:
        nowhere = rh.address(0).rsplit(".", 1)[0] + ".99"
        rh.overrides = {1: {"MASTER_ADDR": nowhere, "PET_MASTER_ADDR": nowhere}}
        rh.start(_train(data, tmp_path / "run"), ranks=[1])
        [node1] = rh.wait(timeout=90)
    assert node1.returncode == 8, node1.output[-3000:]
    last = node1.output.strip().splitlines()[-1]
    assert f"cannot reach the rendezvous endpoint {nowhere}:" in last and "(PET_MASTER_ADDR)" in last
    assert node1.seconds < 60
