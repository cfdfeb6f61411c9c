"""``torchport launch`` (issue 33 #3): the torchrun command for this node from the scheduler's environment,
printed by --dry-run; bad variables and a missing program are one line, exit 2; torchrun's failures are explained."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from torchport.cluster.environments import detect
from torchport.cluster.launch import explain_failure, program_args, torchrun_command

SCHEDULER_VARS = ("SLURM_", "PET_", "MA_", "VC_", "RANK_TABLE_FILE", "MASTER_ADDR", "TORCHELASTIC_RUN_ID")


def _launch(env, *args):
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(SCHEDULER_VARS)}
    return subprocess.run([sys.executable, "-m", "torchport", "launch", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def test_dry_run_prints_this_nodes_torchrun_command_and_where_each_value_came_from():
    out = _launch({"SLURM_JOB_ID": "31337", "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "a[1-2]"},
                  "--dry-run", "--nproc-per-node", "2", "--max-restarts", "3", "--", "train", "--epochs", "1")
    assert out.returncode == 0, out.stderr
    cmd = shlex.split(out.stdout.strip())
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert cmd[3:] == ["--nnodes", "2", "--node-rank", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", "a1:16337",
                       "--rdzv-id", "slurm-31337", "--nproc-per-node", "2", "--max-restarts", "3",
                       "-m", "torchport", "train", "--epochs", "1"]
    assert "environment: slurm" in out.stderr and "node_rank <- SLURM_NODEID" in out.stderr
    assert "nproc_per_node <- --nproc-per-node" in out.stderr


@pytest.mark.parametrize("env,args,message", [
    ({"SLURM_JOB_ID": "1", "SLURM_NNODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "a[1-3]"}, ["train"],
     "slurm: SLURM_JOB_NODELIST names 3 host(s) but SLURM_NNODES=2"),
    ({}, [], "nothing to run"),
    ({}, ["--env", "lsf", "--", "train"], "unknown environment"),
])
def test_bad_environment_or_usage_is_one_line_exit_2(env, args, message):
    out = _launch(env, "--dry-run", "--nproc-per-node", "1", *(["--"] if args and args[0] != "--env" else []), *args)
    assert out.returncode == 2 and message in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_program_forms_and_failure_lines():
    assert program_args(["train", "-x"]) == ["-m", "torchport", "train", "-x"]
    assert program_args(["-m", "pkg.main"]) == ["-m", "pkg.main"]
    assert program_args(["train.py", "--lr", "1"]) == ["train.py", "--lr", "1"]
    assert program_args(["./run.sh"]) == ["--no-python", "./run.sh"]
    plan = detect({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "n0"})
    assert torchrun_command(plan, ["train"], python="py")[:3] == ["py", "-m", "torch.distributed.run"]
    failures = ("Root Cause (first observed failure):\n[0]:\n  time      : x\n  host      : h\n"
                "  rank      : 3 (local_rank: 1)\n  exitcode  : 8 (pid: 1)\n")
    assert explain_failure(plan, failures + "ChildFailedError", 1) == (
        "node 1 of 2, rendezvous 'torchport' at n0:29500: worker(s) failed (rank 3 exit 8); their own error lines are above")
    assert explain_failure(plan, "all fine until it was not", 1) is None
    # node 0 (the store host) lost while the job ran: torchrun's monitor loop loses the store (measured in
    # benchmarks/bench_cluster.py --only loss0) -- not the same line as an endpoint that never answered
    lost = ("rdzv_handler.num_nodes_waiting()\ntorch.distributed.DistNetworkError: Failed to recv, got 0 bytes. "
            "Connection was likely closed.\ntorch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
            "connection to the C10d store has failed.")
    assert explain_failure(plan, lost, 1).startswith(
        "node 1 of 2, rendezvous 'torchport' at n0:29500: lost the rendezvous store at n0:29500 while the job ran")
    refused = "RendezvousConnectionError: The connection to the C10d store has failed. Connection refused"
    assert "cannot reach the rendezvous endpoint n0:29500" in explain_failure(plan, refused, 1)


def test_multi_node_restarts_turn_off_torchruns_shared_worker_store():
    """With the shared store a replacement node waits for a MASTER_ADDR the survivor never writes again (60 s,
    then both fail: benchmarks/bench_cluster.py, node loss); a multi-node job that may restart runs without it."""
    from torchport.cluster.launch import NO_SHARED_STORE, torchrun_env

    two = detect({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "n0", "PET_MASTER_PORT": "29400"})
    assert torchrun_env(two, max_restarts=1, environ={})[NO_SHARED_STORE] == "1"
    assert NO_SHARED_STORE not in torchrun_env(two, max_restarts=0, environ={})
    assert NO_SHARED_STORE not in torchrun_env(detect({}), max_restarts=3, environ={})         # one node
    assert torchrun_env(two, max_restarts=1, environ={NO_SHARED_STORE: "0"})[NO_SHARED_STORE] == "0"   # user's


def test_losing_a_rehearsal_node_kills_its_workers_in_their_own_sessions(tmp_path):
    """torchrun starts each worker in a session of its own: killing the node's process group alone left the
    'dead' node's worker training."""
    import os
    import time

    from torchport.cluster.rehearsal import Rehearsal

    pidfile = tmp_path / "worker.pid"
    (tmp_path / "worker.py").write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                                        "time.sleep(60)\n")
    tree = ("import subprocess, sys, time\n"      # a node: its agent, and a worker in a session of its own
            f"subprocess.Popen([sys.executable, {str(tmp_path / 'worker.py')!r}], start_new_session=True)\n"
            "time.sleep(60)\n")
    rh = Rehearsal(nnodes=1, workdir=tmp_path)
    rh.command = lambda rank, program: [sys.executable, "-c", tree]
    node = rh.start_node(0, [])
    deadline = time.monotonic() + 20
    while not (pidfile.is_file() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int(pidfile.read_text())
    rh.kill(node)
    node.proc.wait(timeout=10)
    for _ in range(100):
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{worker}/stat") as fh:
            if fh.read().split(")")[1].split()[0] == "Z":     # killed, not yet reaped by its dead parent
                break
        time.sleep(0.05)
    else:
        os.kill(worker, 9)
        raise AssertionError(f"worker {worker} of the killed node is still running")


def test_doctor_on_a_cluster_node_reports_the_interface_and_whether_the_endpoint_answers():
    """Loopback only: a listening endpoint is reachable; a closed port is one problem with the fix; a pinned
    interface that does not exist is named; a single node probes nothing."""
    import socket as _socket

    from torchport.cluster.doctor import cluster_report

    with _socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        env = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "127.0.0.1",
               "PET_MASTER_PORT": str(server.getsockname()[1])}
        up = cluster_report(env)
    assert (up["interface"], up["address"], up["endpoint_reachable"], up["problems"]) == ("lo", "127.0.0.1", True, [])
    down = cluster_report(env)                       # the server is closed now
    assert not down["endpoint_reachable"] and [p["id"] for p in down["problems"]] == ["cluster-endpoint"]
    assert "does not answer" in down["problems"][0]["problem"]
    pinned = cluster_report({**env, "HCCL_SOCKET_IFNAME": "eth9-missing"})
    assert any(p["id"] == "cluster-ifname" and "eth9-missing" in p["problem"] for p in pinned["problems"])
    assert cluster_report({}) is None


def test_check_distributed_needs_two_ranks_in_all():
    out = subprocess.run([sys.executable, "-m", "torchport", "check", "--only", "distributed", "--nproc", "1",
                          "--nnodes", "1", "--device", "cpu"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1] == (
        "torchport check: error: --nproc 1 x --nnodes 1: the distributed smoke needs at least 2 ranks"), out.stderr


@pytest.mark.parametrize("extra,shown", [
    ({"HCCL_IF_IP": "192.0.2.77"}, "HCCL_IF_IP=192.0.2.77"),              # TEST-NET-1: never this host's
    ({"TORCHPORT_NODE_ADDR": "192.0.2.78"}, "TORCHPORT_NODE_ADDR=192.0.2.78"),
])
def test_an_address_this_node_does_not_have_is_one_line_exit_2_before_torchrun_starts(extra, shown):
    # measured in the namespace rehearsal (docs/cluster.md, fault table): before this check, a wrong HCCL_IF_IP
    # on CPU/gloo (GLOO_SOCKET_IFNAME pinned) ran to the end, silently advertising an address nobody has
    env = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "9", **extra}
    out = _launch(env, "--nproc-per-node", "1", "--join-timeout", "2", "--", "train")
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "torch.distributed" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"torchport launch: error: node 1 of 2: {shown} is not an address of this node")
    assert "127.0.0.1 (lo)" in out.stderr and "set it to this node's address" in out.stderr


def test_local_address_problem_accepts_this_nodes_own_addresses():
    from torchport.cluster.launch import local_address_problem

    plan = detect({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "n0", "TORCHPORT_NODE_ADDR": "127.0.0.2"})
    assert local_address_problem(plan, {"HCCL_IF_IP": "127.0.0.1"}) is None
    assert local_address_problem(plan.replace(local_addr="no-such-host.invalid"), {}).startswith(
        "node 1 of 2: --local-addr no-such-host.invalid is not an address of this node")
    assert local_address_problem(detect({}), {"HCCL_IF_IP": "192.0.2.1"}) is None     # one node: nothing to check
