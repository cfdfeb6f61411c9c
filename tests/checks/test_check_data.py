"""Data determinism: the built-in pipeline passes; an unseeded worker_init fails, located."""

from __future__ import annotations

from checks_targets import find_problem, healthy, unseeded_workers
from torchport.checks import Status, data_determinism


def test_healthy_pipeline_is_deterministic(portable_device):
    # the loader runs on the host; with the emulated NPU installed its workers still fork cleanly
    r = data_determinism(healthy(), batches=2, workers=(0, 2))
    assert r.status is Status.PASS, r.summary
    assert {e.what for e in r.evidence} >= {"two runs, same seed, num_workers=2", "num_workers=2 vs num_workers=0",
                                            "set_epoch(1) changes the order", "ranks 0 and 1 of 2 get different samples"}


def test_unseeded_worker_init_fails_with_batch_sample_and_function():
    r = data_determinism(unseeded_workers(), batches=2, workers=(0, 2))
    assert r.status is Status.FAIL
    e = find_problem(r, "two runs, same seed, num_workers=2")
    assert "batch 0, sample index" in e.where
    assert "worker_init_fn=checks_targets.unseeded_worker_init" in e.where and "checks_targets.py:" in e.where
    find_problem(r, "num_workers=2 vs num_workers=0")


def test_epoch_and_rank_rules_catch_a_constant_order():
    import dataclasses

    from torchport.checks.builtin import build_tiny_loader

    def no_epoch(spec):  # defect: ignores spec.epoch and spec.rank
        return build_tiny_loader(dataclasses.replace(spec, epoch=0, rank=0, world_size=1))

    r = data_determinism(dataclasses.replace(healthy(), build_loader=no_epoch), batches=2, workers=(0,))
    assert r.status is Status.FAIL
    assert find_problem(r, "set_epoch(1)").measured == "same order"
    find_problem(r, "ranks 0 and 1")
