"""``torchport train`` end to end, in subprocesses: outputs, resume bit-exactness after SIGKILL, a kill during a
checkpoint save, divergence, bad data, and the README's main-job command."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from train_helpers import TINY, fault_cmd, records, run, step_losses, train_cmd

from torchport.runtime import checkpoint as ckpt


def test_tiny_run_writes_metrics_checkpoints_and_summary(tiny_data, env, tmp_path):
    run_dir = tmp_path / "run"
    out = run(train_cmd("--data", tiny_data, *TINY, "--epochs", "2", "--run-dir", run_dir, "--log-every", "5",
                        "--keep-last", "2", "--checkpoint-every", "4", "--json", tmp_path / "s.json"), env)
    assert out.returncode == 0, out.stderr
    assert "epoch 2/2: train loss" in out.stdout and "img/s" in out.stdout and "ETA" in out.stdout
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary == json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 24 and summary["epochs_completed"] == 2 and summary["device"] == "cpu"
    # One closing line: last and best top-1, run dir, last checkpoint; curves.png next to the CSVs.
    last_line = out.stdout.strip().splitlines()[-1]
    best = max(float(r["val_top1"]) for r in records(run_dir, "epoch"))
    assert last_line.startswith("done: val top-1 ") and f"(best {100 * best:.1f}%)" in last_line
    assert f"run dir {run_dir}" in last_line and last_line.endswith(summary["last_checkpoint"])
    assert summary["best_val_top1"] == best
    assert (run_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    try:
        import tensorboard  # noqa: F401
    except ImportError:   # the hint must reach the user
        assert "TensorBoard off" in out.stdout
    assert 0.0 <= summary["val_top1"] <= 1.0 and summary["val_top5"] is None   # 4 classes: no top-5
    epochs = (run_dir / "epochs.csv").read_text().splitlines()
    assert epochs[0].startswith("epoch,step,train_loss,val_loss,val_top1") and len(epochs) == 3
    assert len((run_dir / "steps.csv").read_text().splitlines()) == 1 + 6       # steps 5,10,12,17,22,24
    assert [r["kind"] for r in records(run_dir, "start")] == ["start"]
    kept = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert kept == ["ckpt-000000020.pt", "ckpt-000000024.pt"]                   # keep-last 2
    state = ckpt.load(run_dir / "checkpoints" / kept[-1])
    assert state["progress"]["epoch_done"] and state["progress"]["step"] == 24
    assert state["config"]["model"] == "tinycnn" and (run_dir / "config.yaml").exists()
    # The same run dir without --resume is refused (two runs would share one metrics file).
    again = run(train_cmd("--data", tiny_data, *TINY, "--run-dir", run_dir), env)
    assert again.returncode == 2 and "--resume auto" in again.stderr


def _wait_for(predicate, proc, timeout=300.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if predicate():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def test_resume_after_sigkill_is_bit_identical(tiny_data, env, tmp_path):
    # 12 steps/epoch, 2 epochs, a checkpoint every 4 steps, every loss logged; the worker process stays on
    # (augmentation must not depend on it).
    args = ["--data", tiny_data, *TINY, "--epochs", "2", "--log-every", "1", "--checkpoint-every", "4",
            "--workers", "1", "--keep-last", "2"]
    ref = run(train_cmd(*args, "--run-dir", tmp_path / "ref"), env)
    assert ref.returncode == 0, ref.stderr
    expected = step_losses(tmp_path / "ref")
    assert sorted(expected) == list(range(1, 25))

    killed_dir = tmp_path / "killed"
    proc = subprocess.Popen(fault_cmd(*args, "--run-dir", killed_dir), env={**env, "TORCHPORT_FAULT_STEP_DELAY_S": "0.15"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # Kill mid-epoch 2, after the step-16 checkpoint: steps 17.. must be recomputed after resume.
        reached = _wait_for(lambda: (killed_dir / "metrics.jsonl").exists() and max(step_losses(killed_dir), default=0) >= 18, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert reached and proc.returncode == -signal.SIGKILL, proc.stderr.read()
    before = step_losses(killed_dir)
    assert 18 <= max(before) < 24

    resumed = run(train_cmd(*args, "--run-dir", killed_dir, "--resume", "auto"), env)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "ckpt-000000016.pt" in resumed.stdout
    after = step_losses(killed_dir)
    assert after == expected                                     # every step, exactly
    assert all(before[s] == expected[s] for s in before)         # the re-run steps match the lost ones too
    final_ref = ckpt.load(tmp_path / "ref" / "checkpoints" / "ckpt-000000024.pt")["model"]
    final_res = ckpt.load(killed_dir / "checkpoints" / "ckpt-000000024.pt")["model"]
    assert all(torch.equal(final_ref[k], final_res[k]) for k in final_ref)


def test_sigkill_during_checkpoint_save_leaves_a_loadable_latest(tiny_data, env, tmp_path):
    run_dir = tmp_path / "run"
    ckdir = run_dir / "checkpoints"
    proc = subprocess.Popen(train_cmd("--data", tiny_data, *TINY, "--epochs", "1", "--run-dir", run_dir,
                                      "--checkpoint-every", "2", "--workers", "0"),
                            env={**env, "TORCHPORT_CHECKPOINT_TEST_DELAY_S": "1.5"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # The step-4 temp file exists only between its fsync and its rename (the hook sleeps there).
        in_save = _wait_for(lambda: ckdir.is_dir() and any(p.name.startswith(".ckpt-000000004.pt.tmp-")
                                                           for p in ckdir.iterdir()), proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert in_save, proc.stderr.read()
    manager = ckpt.CheckpointManager(ckdir)
    assert manager.latest() == ckdir / "ckpt-000000002.pt"
    assert ckpt.load(manager.latest())["progress"]["step"] == 2
    resumed = run(train_cmd("--data", tiny_data, *TINY, "--epochs", "1", "--run-dir", run_dir, "--resume", "auto",
                            "--workers", "0"), env)
    assert resumed.returncode == 0, resumed.stderr
    assert "at step 2" in resumed.stdout
    assert not [p for p in ckdir.iterdir() if ".tmp-" in p.name]   # the dead save's temp file is cleaned


def test_divergence_stops_with_a_clear_message_and_keeps_the_last_good_checkpoint(tiny_data, env, tmp_path):
    run_dir = tmp_path / "run"
    out = run(train_cmd("--data", tiny_data, *TINY, "--epochs", "1", "--run-dir", run_dir, "--lr", "1e30",
                        "--log-every", "1", "--checkpoint-every", "1", "--workers", "0"), env)
    assert out.returncode == 4, out.stderr
    assert "loss is nan at step" in out.stderr and "last good checkpoint" in out.stderr
    bad_step = records(run_dir, "error")[0]["step"]
    latest = ckpt.CheckpointManager(run_dir / "checkpoints").latest()
    assert latest is not None and latest.name in out.stderr
    state = ckpt.load(latest)
    assert state["progress"]["step"] < bad_step
    assert all(torch.isfinite(t).all() for t in state["model"].values() if t.is_floating_point())


@pytest.mark.parametrize("loader", ["fast", "simple"])
def test_corrupt_and_non_image_files(tiny_data, env, tmp_path, loader):
    data = shutil.copytree(tiny_data, tmp_path / "data")
    (data / "train" / "ring" / "00001.jpg").write_bytes(b"\xff\xd8\xff\xe0 broken")
    (data / "train" / "ring" / "README.txt").write_text("not an image")
    common = ["--data", data, *TINY, "--epochs", "1", "--workers", "0", "--loader", loader]
    out = run(train_cmd(*common, "--run-dir", tmp_path / "skip"), env)
    assert out.returncode == 0, out.stderr
    assert "skipped 1 unreadable image file(s) this epoch" in out.stdout and "00001.jpg" in out.stdout
    assert "ignored 1 non-image file(s)" in out.stdout
    rec = records(tmp_path / "skip", "bad_files")[0]
    assert rec["unreadable"] == 1 and rec["non_image"] == 1
    assert records(tmp_path / "skip", "epoch")[0]["bad_files"] == 1

    if loader == "simple":   # the error policy once, through a worker process (its traceback is trimmed)
        (data / "train" / "ring" / "README.txt").unlink()
        out = run(train_cmd(*common, "--run-dir", tmp_path / "err", "--bad-files", "error", "--workers", "1"), env)
        assert out.returncode == 3 and "00001.jpg" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 3


def test_data_errors_exit_3_with_the_folder_named(tiny_data, env, tmp_path):
    out = run(train_cmd("--data", tmp_path / "nowhere", *TINY, "--run-dir", tmp_path / "a"), env)
    assert out.returncode == 3 and "nowhere" in out.stderr and "does not exist" in out.stderr
    data = shutil.copytree(tiny_data, tmp_path / "data")
    (data / "train" / "ring2").mkdir()
    out = run(train_cmd("--data", data, *TINY, "--run-dir", tmp_path / "b"), env)
    assert out.returncode == 3 and "ring2" in out.stderr and "no image files" in out.stderr


def test_readme_main_command_short(env, tmp_path):
    """The README's main job exactly as documented (`torchport train`, embedded dataset generated into the
    cache, best device), shortened to one epoch for CI."""
    out = run(train_cmd("--epochs", "1", module="torchport"), env, timeout=600, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "embedded default dataset" in out.stdout and "model tinycnn (10 classes, 64px)" in out.stdout
    assert "3000 train / 600 val images" in out.stdout
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert summary["epochs_completed"] == 1 and summary["steps"] == 46
    assert summary["val_top1"] > 0.15 and summary["val_top5"] is not None    # learning: chance is 0.10
    assert next(Path(env["TORCHPORT_CACHE"]).glob("synth-*/manifest.json"))    # generated once, into the cache
    assert os.listdir(next((tmp_path / "runs").glob("*/checkpoints")))
