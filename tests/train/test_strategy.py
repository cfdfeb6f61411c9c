"""--strategy ddp|fsdp: the loop behind one interface, faults injected from outside, DCP checkpoints through
the trainer, ddp <-> fsdp conversion, and (slow) an elastic torchrun restart of an fsdp run on cpu/gloo."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from train_helpers import FAULT_TRAIN, PY, TINY, emulator_usable, run, step_losses

from torchport.errors import ConfigError
from torchport.train import TrainConfig, train


def _cfg(tiny_data, run_dir, **kw) -> TrainConfig:
    base = dict(data=str(tiny_data), model="tinycnn", image_size=16, batch_size=16, lr=0.02, warmup_epochs=0.0,
                epochs=2, workers=0, run_dir=str(run_dir), progress="none", log_every=1, device="cpu",
                precision="fp32", schedule="constant")   # constant LR: a shorter run is a prefix of a longer one
    return TrainConfig(**{**base, **kw})


def test_the_loop_reads_no_test_variables_and_calls_callbacks_after_each_step(tiny_data, tmp_path):
    from torchport.train import loop

    source = inspect.getsource(loop)
    assert "os.environ" not in source and "TORCHPORT_TRAIN_TEST" not in source
    seen = []
    train(_cfg(tiny_data, tmp_path / "run", epochs=1, max_steps=3),
          callbacks=[lambda **kw: seen.append((kw["step"], kw["epoch"], kw["rank"]))])
    assert seen == [(1, 0, 0), (2, 0, 0), (3, 0, 0)]


def test_fsdp_in_one_process_writes_dcp_checkpoints_and_resumes_bit_exactly(tiny_data, tmp_path):
    ref = train(_cfg(tiny_data, tmp_path / "ref", strategy="fsdp"))
    expected = step_losses(tmp_path / "ref")
    assert ref.last_checkpoint.endswith("step-000000012") and (tmp_path / "ref/checkpoints/latest.json").is_file()

    cut = _cfg(tiny_data, tmp_path / "cut", strategy="fsdp", max_steps=8, checkpoint_every=4)
    train(cut)                                               # stops mid-epoch 2 (6 steps per epoch)
    resumed = train(cut.replace(max_steps=None, resume="auto"))
    assert resumed.resumed_from.endswith("step-000000008")
    assert step_losses(tmp_path / "cut") == expected         # every step, exactly


@pytest.mark.parametrize("first,second", [("ddp", "fsdp"), ("fsdp", "ddp")])
def test_a_checkpoint_converts_between_strategies_and_continues_the_same_run(tiny_data, tmp_path, first, second):
    from torchport.train.convert import convert_checkpoint

    ref = step_losses_of(train(_cfg(tiny_data, tmp_path / "ref", strategy=first)))
    half = train(_cfg(tiny_data, tmp_path / "a", strategy=first, epochs=1))
    dst = tmp_path / "converted" / ("ckpt-000000006.pt" if second == "ddp" else "step-000000006")
    convert_checkpoint(half.last_checkpoint, dst)
    # The run directory has the other strategy's checkpoints: --resume auto says what to do instead of starting over.
    with pytest.raises(ConfigError, match="torchport.train.convert"):
        train(_cfg(tiny_data, tmp_path / "a", strategy=second, resume="auto"))
    out = train(_cfg(tiny_data, tmp_path / "b", strategy=second, resume=str(dst)))
    assert out.resumed_from == str(dst) and out.steps == 12
    assert step_losses(tmp_path / "b") == {s: v for s, v in ref.items() if s > 6}


def step_losses_of(result):
    return step_losses(Path(result.run_dir))


def test_a_mid_epoch_position_moves_to_another_world_size_only_with_the_same_global_batch():
    from torchport.train.loop import _same_position

    saved = {"epoch": 1, "batches_done": 3, "batch_size": 8, "world_size": 2, "seed": 0, "num_samples": 96}
    mine = {**saved, "batches_done": 0, "batch_size": 16, "world_size": 1}
    assert _same_position(saved, mine) == {**saved, "batch_size": 16, "world_size": 1}   # same samples, same step
    assert _same_position(saved, {**saved, "batches_done": 0}) == saved                  # same world: untouched
    with pytest.raises(ConfigError, match="keep the global batch: --batch-size 16"):
        _same_position(saved, {**mine, "batch_size": 8})                                   # 8 x 1 != 8 x 2


def test_each_restart_attempt_gets_its_own_store_keys(monkeypatch):
    """torchrun keeps one store for every attempt; a restarted rank must not read the dead attempt's addresses."""
    import datetime

    from torch.distributed import TCPStore

    from torchport.runtime import distributed as dist

    server = TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(server.port))
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")     # as torchrun says: its agent hosts the store
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    assert dist._attempt_store(datetime.timedelta(seconds=10)) is None              # not under torchrun
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    store = dist._attempt_store(datetime.timedelta(seconds=10))
    store.set("rank_0", "addr")
    assert server.get("torchport/attempt-2/rank_0") == b"addr"
    assert not server.check(["rank_0"])
    # without torchrun's shared store (multi-node restarts, cluster/launch.torchrun_env) every round's workers have
    # a fresh store, and a replacement node's restart count (0) differs from the survivors': no prefix
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")
    assert dist._attempt_store(datetime.timedelta(seconds=10)) is None


@pytest.mark.slow
@pytest.mark.parametrize("device,strategy,precision", [("cpu", "fsdp", "bf16"), ("npu", "fsdp", "fp32")])
def test_elastic_restart_ends_like_an_uninterrupted_run(tiny_data, env, tmp_path, device, strategy, precision):
    """torchrun --max-restarts 1: rank 1 dies after step 9 of 12 (checkpoint every 2 steps); the restarted
    ranks resume from step 8 by themselves (--resume auto) and the losses equal an uninterrupted run's.
    cpu/gloo with fsdp in bf16 (FSDP's MixedPrecisionPolicy, BatchNorm kept fp32); the emulated npu over its
    hccl group with fsdp in fp32 (DDP on npu: tests/emulate/test_emu_distributed.py)."""
    if device == "npu":
        reason = emulator_usable()
        if reason is not None:
            pytest.fail(reason)
        env = {**env, "TORCHPORT_EMULATE": "npu:2"}
    args = ["--data", tiny_data, *TINY, "--epochs", "2", "--workers", "0", "--log-every", "1", "--device", device,
            "--checkpoint-every", "2", "--strategy", strategy, "--precision", precision, "--resume", "auto"]
    launch = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    ref = run([*launch, FAULT_TRAIN, *map(str, args), "--run-dir", str(tmp_path / "ref")], env, timeout=300)
    assert ref.returncode == 0, ref.stderr[-3000:]
    out = run([*launch, "--max-restarts", "1", FAULT_TRAIN, *map(str, args), "--run-dir", str(tmp_path / "el")],
              {**env, "TORCHPORT_FAULT_EXIT": "1:9"}, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    saved = "step-000000008" if strategy == "fsdp" else "ckpt-000000008.pt"
    assert "exitcode: 3" in text and f"{saved} at step 8" in out.stdout and f"device {device}" in out.stdout
    assert step_losses(tmp_path / "el") == step_losses(tmp_path / "ref")
    assert sorted(step_losses(tmp_path / "el")) == list(range(1, 13))
