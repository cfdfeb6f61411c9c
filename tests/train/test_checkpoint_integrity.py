"""Checkpoint integrity and hostile files (issue 16 #4, #5, and the property tests).

* A flipped byte in a saved checkpoint fails its checksum instead of loading silently.
* ``latest()`` / ``--resume auto`` fall back to the newest checkpoint that verifies, saying so.
* A pickle that tries to run code is refused through every torchport load path; the message names
  the blocked global and says it is refused on purpose (no "truncated?" hint, no advice to retry
  with ``weights_only=False``), and the code never runs.
* SIGKILL at random moments of a save (seeded) always leaves a previous checkpoint that verifies.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import signal
import subprocess
import time
import warnings
import zipfile

import pytest
import torch
from typer.testing import CliRunner

from bad_inputs import bad_input
from torchport.errors import ExitCode
from torchport.runtime import checkpoint as ckpt


def _state(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"model": {"w": torch.randn(64, 64, generator=g), "b": torch.zeros(64)}, "progress": {"step": seed}}


def _flip_tensor_byte(path, entry_suffix="data/0", offset=1000):
    """Flip one byte inside a stored tensor's data (the zip stays structurally valid)."""
    with zipfile.ZipFile(path) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith(entry_suffix))
    with open(path, "r+b") as fh:
        fh.seek(info.header_offset + 26)
        name_len, extra_len = int.from_bytes(fh.read(2), "little"), int.from_bytes(fh.read(2), "little")
        data_at = info.header_offset + 30 + name_len + extra_len
        fh.seek(data_at + offset)
        b = fh.read(1)
        fh.seek(data_at + offset)
        fh.write(bytes([b[0] ^ 0x10]))


def test_flipped_byte_fails_the_checksum(tmp_path):
    p = ckpt.save(_state(), tmp_path / "a.pt")
    assert torch.equal(ckpt.load(p)["model"]["w"], _state()["model"]["w"])
    _flip_tensor_byte(p)
    assert zipfile.is_zipfile(p)
    assert torch.load(p, weights_only=True)["model"]["w"].shape == (64, 64)   # torch alone does not notice
    with pytest.raises(ckpt.CheckpointIntegrityError, match="fails its checksum"):
        ckpt.load(p)


def test_format_stays_portable_and_old_checkpoints_load(tmp_path):
    p = ckpt.save(_state(), tmp_path / "a.pt")
    raw = torch.load(p, weights_only=True, map_location="cpu")       # any torch reads it, weights_only
    assert raw["integrity"]["algorithm"] == "sha256" and len(raw["integrity"]["digest"]) == 64
    old = tmp_path / "old.pt"
    torch.save(_state(), old)                                       # written before the record existed
    assert ckpt.load(old)["progress"]["step"] == 0
    edited = dict(raw, progress={"step": 99})                       # an edit that keeps the old digest
    torch.save(edited, tmp_path / "edited.pt")
    with pytest.raises(ckpt.CheckpointIntegrityError):
        ckpt.load(tmp_path / "edited.pt")


def test_latest_falls_back_to_the_newest_checkpoint_that_verifies(tmp_path):
    m = ckpt.CheckpointManager(tmp_path, keep_last=5)
    for step in (1, 2, 3):
        m.save(_state(step), step=step)
    _flip_tensor_byte(m.path_for(3))
    with pytest.warns(RuntimeWarning, match=r"falling back to checkpoint .*ckpt-000000002\.pt.*ckpt-000000003\.pt.*checksum"):
        assert m.resolve("auto") == m.path_for(2)
    _flip_tensor_byte(m.path_for(2))
    _flip_tensor_byte(m.path_for(1))
    with pytest.warns(RuntimeWarning, match="no checkpoint verifies"):
        assert m.latest() is None


def test_resume_auto_in_the_trainer_skips_a_damaged_checkpoint(tmp_path):
    """prepare_run_dir (what `torchport train --resume auto` runs) picks the older, good checkpoint."""
    from torchport.train.config import TrainConfig
    from torchport.train.rundir import prepare_run_dir

    run = tmp_path / "run"
    m = ckpt.CheckpointManager(run / "checkpoints")
    m.save(_state(1), step=1)
    m.save(_state(2), step=2)
    _flip_tensor_byte(m.path_for(2))
    with pytest.warns(RuntimeWarning, match="falling back"):
        _, resume = prepare_run_dir(TrainConfig(run_dir=str(run), resume="auto"), main=True)
    assert resume == m.path_for(1)


def test_resume_auto_stops_when_no_checkpoint_of_the_run_verifies(tmp_path):
    """Every checkpoint damaged or refused: starting afresh in that directory would overwrite them step by step,
    so `--resume auto` stops in one line (exit CHECKPOINT) instead, and nothing is touched."""
    from torchport.train.config import TrainConfig
    from torchport.train.rundir import prepare_run_dir

    run = tmp_path / "run"
    m = ckpt.CheckpointManager(run / "checkpoints")
    m.save(_state(1), step=1)
    _flip_tensor_byte(m.path_for(1))
    before = m.path_for(1).read_bytes()
    with pytest.warns(RuntimeWarning, match="no checkpoint verifies"):
        with pytest.raises(ckpt.CheckpointError, match="none verifies.*--trust-checkpoint") as info:
            prepare_run_dir(TrainConfig(run_dir=str(run), resume="auto"), main=True)
    assert "\n" not in str(info.value) and info.value.exit_code == ckpt.CheckpointError.exit_code
    assert m.path_for(1).read_bytes() == before


# -- hostile pickles ---------------------------------------------------------------------------------------
def _hostile_files(tmp_path, marker):
    """Files that run code when unpickled without restrictions: each would create ``marker``."""

    class Touch:
        def __init__(self, fn):
            self.fn = fn

        def __reduce__(self):
            return (self.fn, (f"touch {marker}",))

    class Exec:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').close()",))

    files = {}
    files["zip-os.system"] = tmp_path / "zip_system.pt"
    torch.save({"model": {"w": torch.ones(2)}, "x": Touch(os.system)}, files["zip-os.system"])
    files["zip-exec"] = tmp_path / "zip_exec.pt"
    torch.save({"x": Exec()}, files["zip-exec"])
    files["raw-os.system"] = tmp_path / "raw_system.pt"
    files["raw-os.system"].write_bytes(pickle.dumps({"x": Touch(os.system)}, protocol=4))
    files["raw-subprocess"] = tmp_path / "raw_popen.pt"
    files["raw-subprocess"].write_bytes(pickle.dumps({"x": Touch(subprocess.getoutput)}, protocol=2))
    return files


def _assert_refusal(message: str) -> None:
    assert "refused on purpose" in message, message
    assert any(g in message for g in ("global posix.system", "global exec", "global subprocess.getoutput", "global commands.getoutput", "global nt.system")), message
    assert "weights_only=False" not in message and "complete torch.save" not in message
    assert "truncat" not in message.lower()


def test_hostile_pickle_is_refused_through_every_load_path(tmp_path, monkeypatch):
    from torchport.checks.checkpoint import inspect_checkpoint

    marker = tmp_path / "PWNED"
    files = _hostile_files(tmp_path, marker)
    for kind, path in files.items():
        # 1. the library loader
        with pytest.raises(ckpt.CheckpointError) as info:
            ckpt.load(path)
        _assert_refusal(str(info.value))
        # 2. the manager (`--resume auto`): skipped, with the reason, never executed
        d = tmp_path / f"mgr-{kind}"
        d.mkdir()
        m = ckpt.CheckpointManager(d)
        m.save(_state(1), step=1)
        m.path_for(2).write_bytes(path.read_bytes())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert m.resolve("auto") == m.path_for(1)
        assert any("refused on purpose" in str(w.message) for w in caught), [str(w.message) for w in caught]
        # 3. `torchport check`'s checkpoint inspection
        out = inspect_checkpoint(path)
        assert out["weights_only"] != "ok"
        # 4. a parity reference's trace sidecar (`torchport check --reference ref.json`)
        from torchport.checks.trace import FORMAT as TRACE_FORMAT, Trace

        ref = tmp_path / f"ref-{kind}.json"
        ref.write_text(json.dumps({"format": TRACE_FORMAT, "platform": "cpu", "precision": "fp32", "steps": 1,
                                   "seed": 0, "batch_size": 1, "loss": [1.0], "grad_norm": [1.0], "lr": [0.1],
                                   "scale": [1.0], "stepped": [True], "batch_hashes": [], "files": {"trace": path.name},
                                   "modules": {"order": [], "step0": {}}}))
        with pytest.raises(ckpt.CheckpointError) as info:
            Trace.load(ref)
        _assert_refusal(str(info.value))
        # 5. the trainer's `--resume PATH`
        monkeypatch.chdir(tmp_path)
        res = CliRunner().invoke(__import__("torchport.cli.main", fromlist=["app"]).app,
                                 ["train", "--resume", str(path), "--run-dir", str(tmp_path / f"run-{kind}"),
                                  "--device", "cpu", "--data", str(tmp_path / "nodata")])
        assert res.exit_code in (ExitCode.CHECKPOINT, ExitCode.DATA), res.output
        assert not marker.exists(), f"{kind}: the payload ran"
    assert not marker.exists()


def test_hostile_checkpoint_message_row(tmp_path, monkeypatch, tiny_data):
    marker = tmp_path / "PWNED"
    path = _hostile_files(tmp_path, marker)["zip-os.system"]
    monkeypatch.chdir(tmp_path)
    from torchport.cli.main import app

    res = CliRunner().invoke(app, ["train", "--data", str(tiny_data), "--resume", str(path), "--run-dir",
                                   str(tmp_path / "run"), "--device", "cpu", "--image-size", "16", "--batch-size", "8",
                                   "--workers", "0", "--model", "tinycnn"])
    row = bad_input("train-resume-hostile-pickle", "--resume a checkpoint whose pickle calls os.system",
                    "torchport train --resume evil.pt", res.exit_code, res.output, expect_code=ExitCode.CHECKPOINT,
                    tmp=tmp_path, contains="refused on purpose")
    _assert_refusal(row["message"])
    assert not marker.exists()


def test_damaged_checkpoint_message_row(tmp_path, monkeypatch, tiny_data):
    p = ckpt.save(_state(), tmp_path / "damaged.pt")
    _flip_tensor_byte(p)
    monkeypatch.chdir(tmp_path)
    from torchport.cli.main import app

    res = CliRunner().invoke(app, ["train", "--data", str(tiny_data), "--resume", str(p), "--run-dir",
                                   str(tmp_path / "run"), "--device", "cpu", "--image-size", "16", "--batch-size", "8",
                                   "--workers", "0", "--model", "tinycnn"])
    bad_input("train-resume-flipped-byte", "--resume a checkpoint with one flipped byte",
              "torchport train --resume damaged.pt", res.exit_code, res.output, expect_code=ExitCode.CHECKPOINT,
              tmp=tmp_path, contains="fails its checksum")


# -- SIGKILL at random moments of a save ----------------------------------------------------------------------
def _save_forever(directory, first_step: int) -> None:
    """Child process body: save checkpoints back to back until killed."""
    m = ckpt.CheckpointManager(directory, keep_last=2)
    g = torch.Generator().manual_seed(first_step)
    state = {"model": {"w": torch.randn(256, 1024, generator=g)}, "progress": {"step": first_step}}
    step = first_step
    while True:
        step += 1
        state["progress"]["step"] = step
        m.save(state, step=step)


def test_sigkill_at_random_moments_of_a_save_leaves_a_checkpoint_that_verifies(tmp_path):
    """Seeded random kill times over several iterations (bounded time); after each kill the newest
    checkpoint that verifies exists and loads. The seed is printed so a failure can be replayed
    (TORCHPORT_KILL_SEED=N)."""
    seed = int(os.environ.get("TORCHPORT_KILL_SEED", "16"))
    rng = random.Random(seed)
    d = tmp_path / "ckpts"
    m = ckpt.CheckpointManager(d, keep_last=2)
    m.save({"model": {"w": torch.zeros(1)}, "progress": {"step": 0}}, step=0)
    deadline = time.monotonic() + 12
    kills = 0
    while kills < 8 and time.monotonic() < deadline:
        pid = os.fork()              # torch is already imported: the child starts saving at once
        if pid == 0:
            try:
                _save_forever(d, kills * 1000)
            finally:
                os._exit(1)
        delay = rng.uniform(0.0, 0.3)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            good = m.latest()
        assert good is not None, f"seed {seed}, kill {kills} after {delay:.3f}s: no checkpoint verifies"
        ckpt.load(good)                      # verifies its checksum
    assert kills >= 4, f"only {kills} kills fit in the time budget"
    print(json.dumps({"seed": seed, "kills": kills}))
