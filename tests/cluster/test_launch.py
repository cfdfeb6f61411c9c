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
