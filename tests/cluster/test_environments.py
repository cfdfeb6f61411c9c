"""Scheduler environments (issue 33 #3): each read from its documented variables into the torchrun arguments
for this node; inconsistent variables are one line naming the variable."""

from __future__ import annotations

import json

import pytest

from torchport.cluster.environments import detect, expand_hostlist, read
from torchport.errors import ConfigError


def _args(plan, **kw):
    a = plan.torchrun_args(**kw)
    return dict(zip(a[::2], a[1::2])) if "--standalone" not in a else a


def test_slurm_host_list_node_rank_and_job_port():
    env = {"SLURM_JOB_ID": "184242", "SLURM_NNODES": "3", "SLURM_NODEID": "2", "SLURM_GPUS_ON_NODE": "8",
           "SLURM_JOB_NODELIST": "gpu[07-08],cpu3", "SLURM_NTASKS_PER_NODE": "1"}
    plan = detect(env)
    assert (plan.source, plan.nnodes, plan.node_rank, plan.nproc_per_node) == ("slurm", 3, 2, 8)
    assert _args(plan) == {"--nnodes": "3", "--node-rank": "2", "--rdzv-backend": "c10d",
                           "--rdzv-endpoint": "gpu07:19242", "--rdzv-id": "slurm-184242", "--nproc-per-node": "8"}
    assert _args(detect({**env, "MASTER_PORT": "6000"}))["--rdzv-endpoint"] == "gpu07:6000"


@pytest.mark.parametrize("spec,hosts", [
    ("node[01-03,07],gpu5", ["node01", "node02", "node03", "node07", "gpu5"]),
    ("a1", ["a1"]), ("r[1-2]-n[08-09]", ["r1-n08", "r1-n09", "r2-n08", "r2-n09"]),
])
def test_slurm_host_lists_expand_in_order(spec, hosts):
    assert expand_hostlist(spec) == hosts


@pytest.mark.parametrize("env,message", [
    ({"SLURM_NNODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n[1-3]"}, "names 3 host(s) but SLURM_NNODES=2"),
    ({"SLURM_NNODES": "2", "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "n[1-2]"}, "node rank 2 (SLURM_NODEID) is outside 0..1"),
    ({"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"}, "SLURM_NODEID is not set"),
    ({"SLURM_NNODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "8"},
     "run one task per node"),
    ({"SLURM_NNODES": "two", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n1"}, "SLURM_NNODES='two' is not an integer"),
    ({"SLURM_NNODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n[3-1]"}, "runs backwards"),
])
def test_slurm_inconsistent_variables_are_one_line(env, message):
    with pytest.raises(ConfigError) as err:
        detect({"SLURM_JOB_ID": "7", **env})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_kubeflow_pytorchjob_elastic_pet_variables():
    env = {"PET_NNODES": "4", "PET_NODE_RANK": "3", "PET_NPROC_PER_NODE": "8", "PET_MASTER_ADDR": "job-master-0",
           "PET_MASTER_PORT": "23456", "MASTER_ADDR": "job-master-0", "WORLD_SIZE": "32", "RANK": "3"}
    a = _args(detect(env))
    assert (a["--nnodes"], a["--node-rank"], a["--nproc-per-node"], a["--rdzv-endpoint"]) == ("4", "3", "8",
                                                                                             "job-master-0:23456")
    plan = detect({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_RDZV_ENDPOINT": "10.1.2.3:29400", "PET_RDZV_ID": "j1"})
    assert (plan.endpoint, plan.rdzv_id, plan.nproc_per_node) == ("10.1.2.3:29400", "j1", None)
    with pytest.raises(ConfigError, match="elastic range"):
        detect({"PET_NNODES": "1:4", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"})


def test_pytorchjob_one_process_per_pod():
    plan = detect({"MASTER_ADDR": "pt-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "2"})
    assert (plan.source, plan.nnodes, plan.node_rank, plan.endpoint) == ("pytorchjob", 3, 2, "pt-master-0:23456")
    with pytest.raises(ConfigError, match="WORLD_SIZE or RANK is not"):
        detect({"MASTER_ADDR": "pt-master-0", "RANK": "0"})
    with pytest.raises(ConfigError, match="already inside a torchrun worker"):
        detect({"MASTER_ADDR": "x", "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "r"})


def test_volcano_master_and_worker_tasks_by_hostname():
    env = {"VC_MASTER_HOSTS": "vj-master-0.vj", "VC_WORKER_HOSTS": "vj-worker-0.vj,vj-worker-1.vj",
           "VC_TASK_INDEX": "0", "VC_JOB_NAME": "vj"}
    assert detect({**env, "HOSTNAME": "vj-master-0"}).node_rank == 0
    plan = detect({**env, "HOSTNAME": "vj-worker-1"})
    assert (plan.nnodes, plan.node_rank, plan.endpoint, plan.rdzv_id) == (3, 2, "vj-master-0.vj:23456", "vj")
    with pytest.raises(ConfigError, match="ambiguous"):
        detect({**env, "HOSTNAME": "elsewhere"})
    single = detect({"VC_WORKER_HOSTS": "w0,w1", "VC_TASK_INDEX": "1"})
    assert (single.nnodes, single.node_rank, single.master_addr) == (2, 1, "w0")


def test_modelarts_ma_variables():
    env = {"MA_NUM_HOSTS": "2", "MA_NUM_GPUS": "8", "VC_TASK_INDEX": "1", "MA_CURRENT_IP": "192.168.0.12",
           "VC_WORKER_HOSTS": "modelarts-job-a-worker-0.job-a,modelarts-job-a-worker-1.job-a", "MA_JOB_ID": "job-a"}
    a = _args(detect(env))
    assert a == {"--nnodes": "2", "--node-rank": "1", "--rdzv-backend": "c10d",
                 "--rdzv-endpoint": "modelarts-job-a-worker-0.job-a:29500", "--rdzv-id": "job-a",
                 "--local-addr": "192.168.0.12", "--nproc-per-node": "8"}
    with pytest.raises(ConfigError, match="names 1 host.* MA_NUM_HOSTS=2"):
        detect({**env, "VC_WORKER_HOSTS": "only-one"})


def _table(tmp_path, servers, **extra):
    doc = {"version": "1.0", "server_count": str(len(servers)), "status": "completed", **extra, "server_list": [
        {"server_id": sid, "device": [{"device_id": str(d), "device_ip": f"192.168.1.{d}", "rank_id": str(r)}
                                      for d, r in devs]} for sid, devs in servers]}
    path = tmp_path / "rank_table.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_hccl_rank_table_file(tmp_path):
    path = _table(tmp_path, [("10.0.0.1", [(0, 0), (1, 1)]), ("10.0.0.2", [(0, 2), (1, 3)])])
    plan = detect({"RANK_TABLE_FILE": path, "HCCL_IF_IP": "10.0.0.2", "MA_NUM_HOSTS": "2"})
    assert (plan.source, plan.nnodes, plan.node_rank, plan.nproc_per_node, plan.endpoint, plan.local_addr) == (
        "rank table", 2, 1, 2, "10.0.0.1:29500", "10.0.0.2")
    with pytest.raises(ConfigError, match="HCCL_IF_IP=10.0.0.9 is not a server_id"):
        detect({"RANK_TABLE_FILE": path, "HCCL_IF_IP": "10.0.0.9"})
    with pytest.raises(ConfigError, match="set HCCL_IF_IP"):
        detect({"RANK_TABLE_FILE": path})
    bad = _table(tmp_path, [("10.0.0.1", [(0, 0), (1, 2)]), ("10.0.0.2", [(0, 1), (1, 3)])])
    with pytest.raises(ConfigError, match="torchrun gives it rank 1"):
        detect({"RANK_TABLE_FILE": bad, "HCCL_IF_IP": "10.0.0.1"})
    pending = _table(tmp_path, [("10.0.0.1", [(0, 0)])], status="initializing")
    with pytest.raises(ConfigError, match="not 'completed'"):
        detect({"RANK_TABLE_FILE": pending, "HCCL_IF_IP": "10.0.0.1"})
    with pytest.raises(ConfigError, match="no such file"):
        detect({"RANK_TABLE_FILE": str(tmp_path / "missing.json"), "HCCL_IF_IP": "10.0.0.1"})


def test_no_scheduler_is_one_standalone_node_and_overrides_revalidate():
    plan = detect({})
    assert plan.source == "local" and plan.torchrun_args(nproc_per_node=2) == ["--standalone", "--nproc-per-node", "2"]
    with pytest.raises(ConfigError, match="unknown environment"):
        read("lsf", {})
    with pytest.raises(ConfigError, match="outside 0..1"):
        detect({"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"}).replace(node_rank=5)
    a = detect({"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"}).torchrun_args(
        max_restarts=2, join_timeout=30, is_host=True)
    assert a[a.index("--rdzv-conf") + 1] == "join_timeout=30,is_host=1" and a[-2:] == ["--max-restarts", "2"]
