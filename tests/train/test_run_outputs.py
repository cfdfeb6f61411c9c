"""Issue 24: the trainer's outputs fail as one line, never a traceback after the work is done.

* a torn last line in ``metrics.jsonl`` (a run killed mid-write), then ``--resume auto``;
* ``--json`` into a path under a file: refused before training, not after it;
* disk full while writing the summary or the metrics: one line naming the file, exit 6.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bad_inputs import bad_input
from torchport.cli.main import app
from torchport.errors import ExitCode, WriteError
from torchport.train.metrics import MetricsLogger, epoch_records, read_jsonl

TINY = ["--model", "tinycnn", "--image-size", "32", "--batch-size", "16", "--epochs", "1", "--workers", "0",
        "--progress", "none", "--max-steps", "2", "--no-tensorboard"]


def _train(*args):
    return CliRunner().invoke(app, ["train", *map(str, args)])


def test_torn_last_line_is_skipped_and_the_next_record_starts_a_new_line(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=False)
    log.write("epoch", epoch=0, step=5, train_loss=1.0)
    log.close()
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"kind": "epoch", "epoch": 1, "st')          # killed mid-write
    log = MetricsLogger(tmp_path, tensorboard=False)          # --resume auto appends to the same file
    log.write("epoch", epoch=1, step=10, train_loss=0.5)
    log.close()
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl", "epoch")] == [5, 10]
    assert [r["epoch"] for r in epoch_records(tmp_path)] == [0, 1]


def test_resume_after_a_torn_metrics_line_finishes_with_a_summary(tmp_path, tiny_data):
    run = tmp_path / "run"
    assert _train("--data", tiny_data, *TINY, "--run-dir", run).exit_code == 0
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"kind": "step", "step": 3, "lo')
    res = _train("--data", tiny_data, *TINY, "--run-dir", run, "--resume", "auto", "--max-steps", "4")
    assert res.exit_code == 0, res.output[-3000:]
    assert json.loads((run / "summary.json").read_text())["steps"] == 4


def test_json_under_a_file_is_refused_before_training(tmp_path, tiny_data):
    (tmp_path / "afile").write_text("x")
    res = _train("--data", tiny_data, *TINY, "--run-dir", tmp_path / "run", "--json", tmp_path / "afile" / "s.json")
    bad_input("train-json-under-a-file", "--json FILE whose folder is a file", "torchport train --json afile/s.json",
              res.exit_code, res.output, expect_code=ExitCode.IO, tmp=tmp_path, contains="is a file")
    assert not (tmp_path / "run").exists()      # refused before any work


def test_disk_full_writing_the_summary_is_one_line_naming_the_checkpoint(tmp_path, tiny_data, monkeypatch):
    real = Path.write_text

    def full(self, *a, **k):
        if self.name in ("summary.json", ".summary.json.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    res = _train("--data", tiny_data, *TINY, "--run-dir", tmp_path / "run")
    bad_input("train-disk-full-summary", "disk full while writing the run summary after training",
              "torchport train (ENOSPC on summary.json)", res.exit_code, res.output, expect_code=ExitCode.IO,
              tmp=tmp_path, contains="disk full")
    assert "last checkpoint" in res.output and "ckpt-000000002.pt" in res.output
    assert not list((tmp_path / "run").glob(".*.tmp"))       # no temp file left behind


def test_disk_full_writing_metrics_is_a_write_error(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=False)
    log._jsonl = open("/dev/full", "a", buffering=1)            # every write fails with ENOSPC
    with pytest.raises(WriteError, match=r"metrics\.jsonl: No space left on device"):
        log.write("note", text="x")


def test_resume_with_another_optimizer_is_one_line(tmp_path, tiny_data):
    run = tmp_path / "run"
    assert _train("--data", tiny_data, *TINY, "--run-dir", run, "--optimizer", "sgd").exit_code == 0
    res = _train("--data", tiny_data, *TINY, "--run-dir", run, "--optimizer", "adamw", "--resume", "auto",
                 "--max-steps", "4")
    bad_input("train-resume-other-optimizer", "--resume auto with another --optimizer than the checkpoint's",
              "torchport train --resume auto --optimizer adamw", res.exit_code, res.output,
              expect_code=ExitCode.CHECKPOINT, tmp=tmp_path, contains="holds SGD optimizer state")
