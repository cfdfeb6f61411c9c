"""Distributed smoke under torchrun: healthy on cpu (gloo) and emulated npu (hccl); a hung rank is reported."""

from __future__ import annotations

import time

import pytest

from checks_targets import find_problem, healthy
from torchport.checks import Status, distributed_smoke


@pytest.mark.slow
def test_two_ranks_on_cpu(cpu):
    r = distributed_smoke(healthy(), device=cpu, nproc=2, timeout=120, barrier_timeout=20)
    assert r.status is Status.PASS, r.summary + "\n" + "\n".join(f"{e.what} {e.measured} {e.detail}" for e in r.evidence)
    backends = [e for e in r.evidence if e.what == "process group backend"]
    assert [e.measured for e in backends] == ["gloo", "gloo"]
    assert [e.measured for e in r.evidence if e.what == "all-reduce sum of rank+1"] == [3.0, 3.0]
    assert next(e for e in r.evidence if e.what == "ranks agree on initial weights").status is Status.PASS
    fsdp = [e for e in r.evidence if e.what == "FSDP step == one-process step"]
    assert [e.status for e in fsdp] == [Status.PASS, Status.PASS] and all(e.measured <= 1e-5 for e in fsdp)
    assert all("50% of the parameters" in e.detail for e in fsdp)          # each rank holds half


@pytest.mark.slow
def test_fsdp_step_that_differs_from_one_process_fails(cpu):
    r = distributed_smoke(healthy(), device=cpu, nproc=2, timeout=120, barrier_timeout=20, fault="fsdp:1")
    assert r.status is Status.FAIL
    bad = find_problem(r, "FSDP step == one-process step")
    assert bad.measured > 1e-5


@pytest.mark.slow
def test_hung_rank_is_reported_not_waited_on(cpu):
    t0 = time.perf_counter()
    r = distributed_smoke(healthy(), device=cpu, nproc=2, timeout=90, barrier_timeout=3, fault="hang:1")
    assert time.perf_counter() - t0 < 90
    assert r.status is Status.FAIL
    hung = find_problem(r, "rank did not finish")
    assert hung.where == "rank 1" and "'barrier'" in hung.measured
    assert "rank 1" in r.summary and "barrier" in r.summary


@pytest.mark.slow
def test_two_ranks_on_emulated_npu_use_hccl(emulated_npu):
    from torchport.runtime.device import select_device

    r = distributed_smoke(healthy(), device=select_device("npu"), nproc=2, timeout=150, barrier_timeout=20)
    text = r.summary + "\n" + "\n".join(f"{e.what} {e.measured} {e.detail}" for e in r.evidence)
    fsdp = [e for e in r.evidence if e.what.startswith("FSDP")]
    assert len(fsdp) == 2, text
    # FSDP2 runs on the emulated hccl group (it has a name, so the device mesh builds): the stage passes
    assert not any(e.what == "FSDP unavailable" for e in fsdp), text
    assert r.status is Status.PASS, text
    assert {e.measured for e in r.evidence if e.what == "process group backend"} == {"hccl"}
    assert {e.where for e in r.evidence if e.what == "process group backend"} == {"rank 0 on npu:0", "rank 1 on npu:1"}


def test_launcher_exit_codes_are_parsed():
    from torchport.checks.distributed import launcher_exit_codes

    text = ("E1130 api.py:1002] failed (exitcode: 3) local_rank: 1 (pid: 16379) of binary: python\n"
            "Failures:\n[0]:\n  time      : 2026\n  host      : h\n  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : -15 (pid: 16378)\n")
    assert launcher_exit_codes(text) == {1: 3, 0: -15}


@pytest.mark.slow
def test_dead_rank_is_reported_with_its_exit_code(cpu):
    """Issue 16 #9: a rank that exits is 'exited with code 3', not 'never left all_reduce'."""
    t0 = time.perf_counter()
    r = distributed_smoke(healthy(), device=cpu, nproc=2, timeout=90, barrier_timeout=5, fault="exit:1")
    assert time.perf_counter() - t0 < 90
    assert r.status is Status.FAIL
    dead = [e for e in r.evidence if e.what == "rank did not finish" and e.where == "rank 1"]
    assert dead and dead[0].measured.startswith("exited with code 3"), [(e.where, e.measured) for e in r.evidence]
    assert "rank 1" in r.summary and "exited with code 3" in r.summary
