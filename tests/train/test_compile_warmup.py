"""--compile: the first (compiling) step is warm-up in the trainer -- timed apart, reported as "compile: X s",
left out of images/s. The compile backend here is torch's "eager" behind a deliberate 1.5 s stall, so a
throughput that counted the compile would be visibly lower than one that does not."""

from __future__ import annotations

import json
import time


from torchport.train import TrainConfig, train

from slow_compiler import STALL_S, slow_compiler_cpu  # noqa: F401 - the fixture


def test_trainer_counts_the_compile_as_warm_up_and_reports_it(slow_compiler_cpu, tiny_data, tmp_path, capsys):
    cfg = TrainConfig(data=str(tiny_data), model="tinycnn", image_size=32, batch_size=8, epochs=1, workers=0,
                      run_dir=str(tmp_path / "run"), progress="plain", device="cpu", compile=True, log_every=1,
                      max_steps=4, precision="fp32")
    result = train(cfg)
    out = capsys.readouterr().out
    # the compile stall is the first step's, reported apart
    assert result.compile_s is not None and result.compile_s >= STALL_S
    assert f"compile: {result.compile_s:.2f} s (backend slow_eager; first step, warm-up" in out
    records = [json.loads(ln) for ln in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    comp = [r for r in records if r["kind"] == "compile"]
    assert len(comp) == 1 and comp[0]["step"] == 1 and comp[0]["seconds"] >= STALL_S
    steps = [r for r in records if r["kind"] == "step"]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert steps[0]["images_per_s"] is None                                # that window held only the warm-up step
    assert all(r["images_per_s"] > 0 for r in steps[1:])
    # the epoch's throughput: the 3 timed steps' images over the epoch's time less the compile step's
    epoch = [r for r in records if r["kind"] == "epoch"][0]
    assert epoch["epoch_time_s"] > result.compile_s
    # both seconds are recorded to 0.01 s, over a denominator of a few hundredths: bound by the rounding (a count
    # that held the 1.5 s compile would be ~20x below the lower bound)
    e, c = epoch["epoch_time_s"], result.compile_s
    low, high = 3 * 8 / (e - c + 0.01), 3 * 8 / max(e - c - 0.01, 1e-3)
    assert low * 0.97 <= epoch["images_per_s"] <= high * 1.03, (low, epoch["images_per_s"], high)
    assert low * 0.85 <= result.images_per_s <= high * 1.15                # steps only (no loader wait between)
    assert result.images_per_s > 1.5 * 4 * 8 / epoch["epoch_time_s"]        # counting the compile would be far lower
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["compile_s"] == result.compile_s


def test_no_compile_no_compile_report(tiny_data, tmp_path):
    cfg = TrainConfig(data=str(tiny_data), model="tinycnn", image_size=32, batch_size=8, epochs=1, workers=0,
                      run_dir=str(tmp_path / "run"), progress="none", device="cpu", max_steps=2)
    assert train(cfg).compile_s is None
    assert '"kind": "compile"' not in (tmp_path / "run" / "metrics.jsonl").read_text()


def test_the_wait_for_the_first_batch_is_not_compile_time_and_stays_in_the_window():
    """Warm-up is the compiling step from when its batch had arrived: the loader's start-up before it is not
    compile time, and it stays in the throughput window, as it does in an eager run."""
    from torchport.train.loop import _Meter

    meter = _Meter("cpu")
    meter.start_epoch()
    time.sleep(0.3)                          # workers starting, the first batch fetched
    started = time.perf_counter()
    time.sleep(0.2)                          # the compiling step
    compile_s = meter.warm_up(started)
    assert 0.2 <= compile_s < 0.3
    _, window = meter.read()
    assert window >= 0.3                     # the wait is still in the window
