"""DDP under torchrun: ``python -m torch.distributed.run --nproc-per-node 2 -m torchport run script --ddp``.

The unmodified script calls ``init_process_group(backend="nccl")``, ``torch.cuda.set_device``,
``model.cuda(local_rank)`` and ``DDP(model, device_ids=[local_rank])``; the shim turns that
into gloo on CPU and hccl on two emulated npus.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from shim_helpers import FIXTURE_SCRIPT, ROOT, require_emulator
from clean_env import clean_env


def torchrun_fixture(tmp_path, env_extra: dict[str, str], device_args: list[str]) -> tuple[subprocess.CompletedProcess, list[dict]]:
    report = tmp_path / "ddp.json"
    env = clean_env("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")
    env.update(env_extra)
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "torchport", "run", *device_args, "--report", "json", "--report-file", str(report),
           str(FIXTURE_SCRIPT), "--ddp", "--steps", "3", "--checkpoint", str(tmp_path / "ddp.pt")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    docs = [json.loads(p.read_text()) for p in (report, tmp_path / "ddp.rank1.json") if p.exists()]
    return proc, docs


def _check(proc, docs, backend: str, device_type: str) -> None:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.count("done") == 2  # both ranks finished
    assert proc.stdout.count("step 2 loss") == 2
    assert "reloaded checkpoint step 3" in proc.stdout  # rank 0 wrote and reread the checkpoint
    assert len(docs) == 2, "each rank writes its own report (rank 1 with a .rank1 suffix)"
    for doc in docs:
        rec = {r["api"]: r for r in doc["redirects"]}
        assert rec["torch.distributed.init_process_group"]["example"] == f"'nccl' -> {backend}"
        assert "torch.nn.parallel.DistributedDataParallel" in rec
        assert rec["torch.cuda.set_device"]["count"] == 1
        assert doc["target"].split(":")[0] == device_type
    assert {d["target"] for d in docs} == ({"cpu"} if device_type == "cpu" else {f"{device_type}:0", f"{device_type}:1"})


@pytest.mark.slow
def test_ddp_gloo_on_cpu(tmp_path):
    proc, docs = torchrun_fixture(tmp_path, {}, ["--device", "cpu"])
    _check(proc, docs, "gloo", "cpu")
    rec = {r["api"]: r for r in docs[0]["redirects"]}
    assert rec["torch.nn.parallel.DistributedDataParallel"]["example"].endswith("None (cpu module)")


@pytest.mark.slow
@pytest.mark.usefixtures("_emulator_required")
def test_ddp_hccl_on_two_emulated_npus(tmp_path):
    proc, docs = torchrun_fixture(tmp_path, {"TORCHPORT_EMULATE": "npu:2"}, [])
    _check(proc, docs, "hccl", "npu")


@pytest.fixture
def _emulator_required():
    require_emulator()
