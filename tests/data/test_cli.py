"""`torchport data ...` and `torchport bench data` end to end (tiny data)."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from torchport.cli.main import app

runner = CliRunner()


def test_synth_pack_inspect_verify(tmp_path):
    r = runner.invoke(app, ["data", "synth", str(tmp_path / "syn"), "--num-classes", "2", "--per-class", "4",
                                 "--image-size", "24"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["data", "pack", str(tmp_path / "syn"), str(tmp_path / "sh"), "--mode", "predecoded",
                            "--resize-short-side", "24", "--workers", "1", "--json", str(tmp_path / "pack.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "pack.json").read_text())
    assert rep["train"]["written"] == 8 and rep["val"]["written"] == 2
    r = runner.invoke(app, ["data", "inspect", str(tmp_path / "sh"), "--json", str(tmp_path / "inspect.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "inspect.json").read_text())["train"]["samples"] == 8
    r = runner.invoke(app, ["data", "verify", str(tmp_path / "sh")])
    assert r.exit_code == 0, r.output
    shard = tmp_path / "sh" / "train" / "shard-00000.tps"
    data = bytearray(shard.read_bytes())
    data[200] ^= 0xFF
    shard.write_bytes(bytes(data))
    r = runner.invoke(app, ["data", "verify", str(tmp_path / "sh"), "--json", str(tmp_path / "v.json")])
    assert r.exit_code == 1
    v = json.loads((tmp_path / "v.json").read_text())
    assert not v["train"]["ok"] and "shard-00000.tps" in v["train"]["problems"][0] and v["val"]["ok"]


def test_pack_jpeg_restart_markers_flag(tmp_path, train_folder):
    for flag, expect in (("--restart-markers", 36), ("--no-restart-markers", 0)):
        out = tmp_path / flag.strip("-")
        r = runner.invoke(app, ["data", "pack", str(train_folder), str(out), "--mode", "jpeg", "--workers", "1", flag,
                                "--json", str(out) + ".json"])
        assert r.exit_code == 0, r.output
        assert f"{expect} with restart markers" in r.output
        assert json.loads(open(str(out) + ".json").read())["all"]["restart_markers"] == expect


def test_pack_bad_source_exit_code(tmp_path):
    r = runner.invoke(app, ["data", "pack", str(tmp_path / "missing"), str(tmp_path / "out")])
    assert r.exit_code == 3 and "does not exist" in r.output       # ExitCode.DATA: the source is bad input data


def test_bench_data_json(tmp_path, train_folder):
    from torchport.cli.data_bench import register_bench_data

    bench = typer.Typer()

    @bench.callback()
    def _group() -> None:  # a group, as under `torchport bench`
        pass

    register_bench_data(bench)
    out = tmp_path / "b.json"
    r = runner.invoke(bench, ["data", "--root", str(train_folder), "--workers", "0", "--batch-size", "8", "--image-size", "32",
                              "--seconds", "0.2", "--rounds", "1", "--baselines", "pil", "--no-profile", "--json", str(out), "--png", str(tmp_path / "b.png")],
                      env={"TORCHPORT_CACHE": str(tmp_path / "cache")})
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    for name in ("pil", "jpeg", "predecoded", "folder"):
        assert res["results"][name]["images_per_s"] > 0
        assert "ratio_vs_pil" in res["results"][name]
    assert res["results"]["pil"]["ratio_vs_pil"] == 1.0
    steps = res["train_step"]["results"]
    assert set(steps) == {"pil", "jpeg", "predecoded"} and steps["pil"]["step_ms"] > 0
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_photos_are_imagenet_like(tmp_path):
    import pytest

    import skimage  # noqa: F401 - a dev dependency: missing it fails, it does not skip
    import simplejpeg

    r = runner.invoke(app, ["data", "photos", str(tmp_path / "ph"), "--count", "8"])
    assert r.exit_code == 0, r.output
    files = sorted((tmp_path / "ph").glob("*/*.jpg"))
    assert len(files) == 8 and len({f.parent.name for f in files}) >= 4
    for f in files:
        h, w, _, sub = simplejpeg.decode_jpeg_header(f.read_bytes())
        assert {h, w} == {375, 500} and sub == "420"
        assert f.stat().st_size > 20_000  # photographs with noise, not flat shapes
