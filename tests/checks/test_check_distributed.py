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
    assert r.status is Status.PASS, r.summary + "\n" + "\n".join(f"{e.what} {e.measured} {e.detail}" for e in r.evidence)
    assert {e.measured for e in r.evidence if e.what == "process group backend"} == {"hccl"}
    assert {e.where for e in r.evidence if e.what == "process group backend"} == {"rank 0 on npu:0", "rank 1 on npu:1"}
