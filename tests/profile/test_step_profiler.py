"""StepProfiler: phases partition the step, sync boundaries attribute asynchronous work, warm-up is excluded."""

from __future__ import annotations

import time

import pytest

import torchport
from torchport.profile import StepProfiler
from torchport.profile import profiler as profiler_mod


def _busy(seconds: float) -> None:
    """Hold the CPU (a stand-in for host work that time.sleep granularity would blur)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture
def cpu():
    return torchport.select_device("cpu")


def test_phases_sum_to_independently_measured_step_time(cpu):
    """Sum of phases over all steps vs a wall clock around the loop: within 5%.

    The loop body has an unannotated part (the "logging" sleep); if the profiler
    dropped time outside named phases the sums would fall short of the wall clock.
    """
    import torch

    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [torch.randn(32, 64) for _ in range(4)]

    prof = StepProfiler(warmup=0, target=cpu)
    t0 = time.perf_counter()
    for x in prof.iterate(batches, steps=8):
        with prof.phase("forward"):
            loss = model(x).square().mean()
        with prof.phase("backward"):
            loss.backward()
        time.sleep(0.004)  # un-phased host work (logging): must land in "other"
        with prof.phase("optimizer"):
            opt.step()
            opt.zero_grad()
    wall = time.perf_counter() - t0

    recs = prof.records
    assert len(recs) == 8
    for r in recs:  # each step is partitioned exactly
        assert sum(r.phases.values()) == pytest.approx(r.total_s, rel=1e-9, abs=1e-12)
        assert r.phases["other"] >= 0.0035
    total = sum(r.total_s for r in recs)
    assert total == pytest.approx(wall, rel=0.05)
    res = prof.result(measure_sync=False)
    assert sum(res.phase_s.values()) == pytest.approx(res.step_s, rel=1e-9)
    assert sum(res.fractions.values()) == pytest.approx(1.0)


def test_manual_phase_and_step_api(cpu):
    prof = StepProfiler(warmup=1, target=cpu)
    with prof:
        for _ in range(3):
            with prof.phase("data"):
                _busy(0.002)
            with prof.phase("forward"):
                _busy(0.004)
            prof.step()
    res = prof.result(measure_sync=False)
    assert len(res.steps) == 2 and res.warmup_steps == 1
    assert res.phase_s["forward"] >= 0.004 and res.phase_s["data"] >= 0.002
    assert set(res.phase_s) == {"data", "forward", "other"}
    assert [s.index for s in res.steps] == [1, 2]


def test_warmup_steps_are_excluded(cpu):
    prof = StepProfiler(warmup=2, target=cpu)
    for i in prof.iterate(range(100), steps=5):
        with prof.phase("forward"):
            _busy(0.05 if i < 2 else 0.002)  # the first steps "compile graphs"
    res = prof.result(measure_sync=False)
    assert res.warmup_steps == 2 and len(res.steps) == 3
    assert max(s.total_s for s in res.steps) < 0.03
    assert [s.index for s in res.steps] == [2, 3, 4]


def test_all_warmup_is_a_clear_error(cpu):
    prof = StepProfiler(warmup=3, target=cpu)
    for _ in prof.iterate(range(2)):
        pass
    with pytest.raises(ValueError, match="warm-up"):
        prof.result(measure_sync=False)


def test_sync_boundaries_charge_async_work_to_the_phase_that_queued_it(cpu, monkeypatch):
    """A fake asynchronous device: "forward" queues 30 ms of work and returns at once;
    synchronize() waits for the queue. With phase syncs the 30 ms is charged to forward;
    without them it shows up wherever the host next waits (the step boundary: "other")."""
    queue = {"pending": 0.0}

    def fake_sync(_target):
        _busy(queue["pending"])
        queue["pending"] = 0.0

    monkeypatch.setattr(profiler_mod, "_synchronize", fake_sync)

    def run(sync: bool):
        prof = StepProfiler(warmup=0, target=cpu, sync=sync)
        for _ in prof.iterate(range(3), steps=3):
            with prof.phase("forward"):
                queue["pending"] += 0.03  # asynchronous launch
            with prof.phase("optimizer"):
                _busy(0.001)
        return prof.result(measure_sync=False)

    synced = run(True)
    assert synced.phase_s["forward"] >= 0.03
    assert synced.phase_s["other"] < 0.01
    assert synced.analysis.dominant_phase == "forward"
    unsynced = run(False)
    assert unsynced.phase_s["forward"] < 0.01  # the launch returned at once ...
    assert unsynced.phase_s["other"] >= 0.03  # ... and the host waited at the step boundary
    assert unsynced.step_s >= 0.03
    assert synced.sync_calls_per_step > unsynced.sync_calls_per_step


def test_phases_cannot_nest(cpu):
    prof = StepProfiler(warmup=0, target=cpu)
    with pytest.raises(RuntimeError, match="cannot nest"):
        with prof.phase("forward"):
            with prof.phase("backward"):
                pass


def test_iterate_stops_with_the_iterable_and_drops_the_partial_step(cpu):
    prof = StepProfiler(warmup=0, target=cpu)
    seen = list(prof.iterate([1, 2, 3]))
    assert seen == [1, 2, 3] and len(prof.records) == 3


def test_iterate_cycles_to_reach_steps(cpu):
    prof = StepProfiler(warmup=0, target=cpu)
    assert list(prof.iterate([1, 2], steps=5)) == [1, 2, 1, 2, 1]
    assert len(prof.records) == 5
