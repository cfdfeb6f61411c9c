"""The trainer on every backend: in-process on cpu / emulated npu / cuda (``portable_device``), checkpoints
crossing devices in fresh processes, and 2-process torchrun (gloo on cpu, hccl on the emulated npu)."""

from __future__ import annotations

import json

import pytest
import torch
from train_helpers import PY, TINY, needs_emulator, run, step_losses, train_cmd

from torchport.runtime import checkpoint as ckpt
from torchport.train import TrainConfig, train


def test_train_api_on_every_device(portable_device, tiny_data, tmp_path):
    cfg = TrainConfig(data=str(tiny_data), model="tinycnn", image_size=32, batch_size=8, lr=0.02, epochs=1,
                      max_steps=4, workers=0, run_dir=str(tmp_path / "run"), progress="none", log_every=1,
                      device=portable_device.type)
    result = train(cfg)
    assert result.steps == 4 and result.device.startswith(portable_device.type)
    assert result.val_top1 is not None and result.last_checkpoint
    state = torch.load(result.last_checkpoint, weights_only=True)        # no map_location needed: all CPU
    assert all(t.device.type == "cpu" for t in state["model"].values())
    assert state["versions"]["device"].startswith(portable_device.type)
    if portable_device.is_accelerator:
        assert portable_device.type in state["rng"]["devices"]


@needs_emulator()
def test_checkpoints_cross_devices_in_fresh_processes(tiny_data, env, tmp_path):
    """npu -> cpu -> npu, each leg a fresh process resuming the previous leg's checkpoint mid-epoch; fp32 and a
    constant LR make the chain comparable with one uninterrupted cpu run."""
    args = ["--data", tiny_data, *TINY, "--epochs", "1", "--workers", "0", "--precision", "fp32",
            "--schedule", "constant", "--log-every", "1", "--checkpoint-every", "2"]
    npu = {**env, "TORCHPORT_EMULATE": "npu"}
    leg1 = run(train_cmd(*args, "--run-dir", tmp_path / "chain", "--max-steps", "4"), npu)
    assert leg1.returncode == 0, leg1.stderr
    assert "device npu (emulated):0" in leg1.stdout
    saved = ckpt.load(tmp_path / "chain" / "checkpoints" / "ckpt-000000004.pt")
    assert "npu" in saved["rng"]["devices"] and not saved["progress"]["epoch_done"]

    leg2 = run(train_cmd(*args, "--run-dir", tmp_path / "chain", "--max-steps", "8", "--resume", "auto"), env)
    assert leg2.returncode == 0, leg2.stderr
    assert "device cpu" in leg2.stdout and "ckpt-000000004.pt at step 4" in leg2.stdout
    leg3 = run(train_cmd(*args, "--run-dir", tmp_path / "chain", "--resume", "auto"), npu)
    assert leg3.returncode == 0, leg3.stderr
    assert "device npu (emulated):0" in leg3.stdout and "at step 8" in leg3.stdout

    ref = run(train_cmd(*args, "--run-dir", tmp_path / "ref"), env)
    assert ref.returncode == 0, ref.stderr
    chain, expected = step_losses(tmp_path / "chain"), step_losses(tmp_path / "ref")
    assert sorted(chain) == sorted(expected) == list(range(1, 13))
    # fp32 on the emulated npu runs the CPU's kernels on the same bytes: the chain is the cpu run, bit for bit (issue
    # 39: a fused device-side normalisation once made it drift by 3e-4 on AVX2 machines). Where this fails,
    # tests/emulate/test_emu_fp32_identity.py names the first op that differs.
    assert chain == expected
    summary = json.loads((tmp_path / "chain" / "summary.json").read_text())
    assert summary["steps"] == 12 and summary["epochs_completed"] == 1


def _torchrun(*args):
    return [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "torchport", "train",
            *map(str, args)]


def _check_two_process_run(out, run_dir, device_word):
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("epoch 1/1: train loss") == 1          # rank 0 prints, rank 1 does not
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["device"].startswith(device_word)
    assert summary["steps"] == 6                                   # 96 images / (8 per rank x 2 ranks)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["ckpt-000000004.pt", "ckpt-000000006.pt"]


def test_torchrun_two_processes_gloo_on_cpu(tiny_data, env, tmp_path):
    out = run(_torchrun("--data", tiny_data, *TINY, "--epochs", "1", "--workers", "0", "--checkpoint-every", "4",
                        "--run-dir", tmp_path / "run"), env, timeout=300)
    _check_two_process_run(out, tmp_path / "run", "cpu")


@needs_emulator()
def test_torchrun_two_processes_hccl_on_emulated_npu(tiny_data, env, tmp_path):
    out = run(_torchrun("--data", tiny_data, *TINY, "--epochs", "1", "--workers", "0", "--checkpoint-every", "4",
                        "--run-dir", tmp_path / "run"), {**env, "TORCHPORT_EMULATE": "npu:2"}, timeout=300)
    _check_two_process_run(out, tmp_path / "run", "npu")


def test_compile_where_the_backend_has_no_compiler_is_a_clear_error(emulated_npu, tiny_data, tmp_path):
    import dataclasses

    from torchport import backends
    from torchport.runtime import device as runtime_device
    from torchport.runtime.device import ConfigError

    # the emulated npu compiles (Inductor on the host view); a record without a compiler stands for a card whose
    # torch.compile backend is not known (real torch_npu without torchair: npu.SPEC's compile_backend is None)
    emulated_spec = backends.get("npu")
    backends.register(dataclasses.replace(emulated_spec, compile_backend=None), replace=True)
    runtime_device.reset_selection()
    cfg = TrainConfig(data=str(tiny_data), model="tinycnn", image_size=32, batch_size=8, epochs=1, workers=0,
                      run_dir=str(tmp_path / "run"), progress="none", device="npu", compile=True)
    try:
        with pytest.raises(ConfigError, match="has no torch.compile backend; run without --compile"):
            train(cfg)
    finally:
        backends.register(emulated_spec, replace=True)
        runtime_device.reset_selection()
