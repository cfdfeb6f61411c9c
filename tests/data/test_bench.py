"""`torchport bench data`: baselines in fresh processes, a missing baseline is one line, JSON to stdout, profile."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from torchport.cli.data_bench import register_bench_data
from torchport.data import bench, bench_baselines


def _bench_app():
    app = typer.Typer()

    @app.callback()
    def _group() -> None:  # a group, as under `torchport bench`
        pass

    register_bench_data(app)
    return app


def test_missing_baseline_is_one_line_and_the_rest_runs(tmp_path, train_folder, monkeypatch):
    real = bench_baselines._importable
    monkeypatch.setattr(bench_baselines, "_importable", lambda m: False if m == "nvidia.dali" else real(m))
    r = CliRunner().invoke(_bench_app(), [
        "data", "--root", str(train_folder), "--workers", "0", "--batch-size", "8", "--size", "32", "--seconds", "0.2",
        "--rounds", "1", "--modes", "jpeg", "--baselines", "dali,torchvision-io", "--no-train-step", "--no-profile",
        "--json", "-",
    ], env={"TORCHPORT_CACHE": str(tmp_path / "cache")})
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout[r.stdout.index("{"):])  # stdout is the JSON document only
    out = res["results"]
    assert list(out) == ["pil", "torchvision-io", "jpeg", "dali"]  # pil is always the reference
    assert out["dali"]["status"] == "skipped" and "nvidia.dali" in out["dali"]["error"]
    assert "\n" not in out["dali"]["error"]
    for name in ("pil", "torchvision-io", "jpeg"):
        assert out[name]["status"] == "ok" and out[name]["images_per_s"] > 0
        assert out[name]["ratio_vs_dali"] is None and out[name]["ratio_vs_pil"] > 0
    assert out["pil"]["ratio_vs_pil"] == 1.0
    assert out["jpeg"]["implied_bytes_per_s"] > 0 and res["machine"]["copy_bandwidth_bytes_per_s"] > 1e8
    assert res["jpeg_decoder"].startswith("libjpeg-turbo region decoder")


def test_torchvision_io_baseline_delivers_normalised_batches(train_folder):
    loader = bench_baselines.build_baseline("torchvision-io", train_folder, batch_size=4, workers=0, image_size=24)
    x, y = next(iter(loader))
    assert x.shape == (4, 3, 24, 24) and x.dtype.is_floating_point and y.shape == (4,)
    assert -2.2 < float(x.min()) < 0 < float(x.max()) < 2.7  # ImageNet-normalised range


def test_unknown_baseline_is_a_usage_error(tmp_path):
    r = CliRunner().invoke(_bench_app(), ["data", "--baselines", "pil,opencv"])
    assert r.exit_code == 2 and "opencv" in r.output


def test_jpeg_worker_profile_has_every_stage(shards):
    from torchport.data.bench_profile import profile_jpeg

    prof = profile_jpeg(shards["jpeg"], image_size=16, n=16, reps=1, batch_size=4)
    st = prof["stages_us"]
    for k in ("read", "entropy", "idct_upsample", "colour", "decode_as_used", "decode_as_used_no_restarts", "crop_resize_flip",
              "normalise", "ipc"):
        assert st[k] >= 0
    assert st["entropy"] > 0 and st["decode_as_used"] > 0
    assert prof["worker_us"] >= st["decode_as_used"]
