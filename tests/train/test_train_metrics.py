"""Metrics sinks: JSONL + CSV that append across resumes, TensorBoard when importable, top-k counting."""

from __future__ import annotations

import sys
import types

import torch

from torchport.train.metrics import MetricsLogger, read_jsonl, topk_correct


def test_jsonl_and_csv_append_across_restarts(tmp_path):
    for attempt in range(2):                      # a resumed run appends, the header is written once
        log = MetricsLogger(tmp_path, tensorboard=False)
        log.write("step", step=attempt + 1, epoch=0, loss=0.5 + attempt, lr=0.1, images_per_s=10.0, loss_scale=None)
        log.write("epoch", epoch=0, step=attempt + 1, train_loss=float("nan"), val_top1=0.25)
        log.close()
    steps = (tmp_path / "steps.csv").read_text().splitlines()
    assert steps[0].startswith("step,epoch,loss") and len(steps) == 3 and steps[2].startswith("2,0,1.5,")
    assert [r["loss"] for r in read_jsonl(tmp_path / "metrics.jsonl", "step")] == [0.5, 1.5]
    assert read_jsonl(tmp_path / "metrics.jsonl", "epoch")[0]["train_loss"] == "nan"   # JSON-safe


def test_disabled_logger_writes_nothing(tmp_path):
    log = MetricsLogger(tmp_path / "rank1", enabled=False)
    log.write("step", step=1, loss=1.0)
    log.close()
    assert not (tmp_path / "rank1").exists()


def test_tensorboard_used_when_installed(tmp_path, monkeypatch):
    calls = []

    class FakeWriter:
        def __init__(self, logdir):
            calls.append(("init", logdir))

        def add_scalar(self, tag, value, step):
            calls.append((tag, value, step))

        def close(self):
            calls.append(("close",))

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=FakeWriter))
    log = MetricsLogger(tmp_path)
    log.write("step", step=3, epoch=0, loss=2.0, lr=0.1, note="text")
    log.close()
    assert ("step/loss", 2.0, 3) in calls and ("step/lr", 0.1, 3) in calls and calls[-1] == ("close",)
    assert not any(c[0] == "step/note" for c in calls)


def test_topk_correct_caps_k_at_the_number_of_classes():
    logits = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.05, 0.15], [0.2, 0.3, 0.5]])
    labels = torch.tensor([1, 2, 0])
    top1, top2, top5 = topk_correct(logits, labels, (1, 2, 5))
    assert (int(top1), int(top2), int(top5)) == (1, 2, 3)
