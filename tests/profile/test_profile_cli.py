"""`torchport profile`: JSON, PNG stacked bars, Chrome trace, config files, exit codes."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from torchport.cli import profile as profile_cli


@pytest.fixture(scope="module")
def app():
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # keep "profile" a sub-command
        pass

    profile_cli.register(app)
    return app


def test_profile_cli_writes_json_png_and_trace(app, tmp_path):
    out, png, trace = tmp_path / "p.json", tmp_path / "p.png", tmp_path / "trace"
    r = CliRunner().invoke(app, ["profile", "--preset", "tiny", "--model", "tinycnn", "--image-size", "32", "--batch-size",
                                 "8", "--steps", "3", "--warmup", "1", "--free-steps", "2", "--device", "cpu",
                                 "--slow-data-ms", "10", "--json", str(out), "--png", str(png),
                                 "--trace", str(trace), "--trace-steps", "2"])
    assert r.exit_code == 0, r.output
    assert "input-bound" in r.output and "warning" in r.output

    data = json.loads(out.read_text())
    assert data["schema"] == "torchport.profile/1" and data["device"] == "cpu"
    assert data["steps"] == 3 and data["warmup_steps"] == 1
    phases = data["phases"]
    assert set(phases) >= {"data", "copy", "forward", "backward", "optimizer", "other"}
    assert sum(p["fraction"] for p in phases.values()) == pytest.approx(1.0)
    assert sum(p["seconds"] for p in phases.values()) == pytest.approx(data["step_s"], rel=1e-6)
    assert data["dominant_phase"] == "data" and data["verdict"] == "input-bound"
    assert data["sync"]["unprofiled_step_s"] > 0
    assert len(data["per_step"]) == 3

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    files = list(trace.rglob("*.json"))
    assert files, "no Chrome trace written"
    events = json.loads(files[0].read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert {"torchport/forward", "torchport/backward", "torchport/data"} <= names


def test_profile_cli_reads_a_config_file(app, tmp_path):
    cfg = tmp_path / "profile.yaml"
    cfg.write_text("preset: tiny\nmodel: tinycnn\nimage_size: 32\nbatch_size: 4\nsteps: 2\nwarmup: 1\nfree_steps: 0\n"
                   "precision: amp\n")  # keys are the flags' names
    out = tmp_path / "p.json"
    r = CliRunner().invoke(app, ["profile", "--config", str(cfg), "--device", "cpu", "--json", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["precision"] == "bf16"  # "amp" on cpu = its low precision
    assert data["settings"]["workload"]["batch"] == 4 and data["steps"] == 2


@pytest.mark.parametrize("args, message", [
    (["--model", "no_such_net", "--steps", "1"], "unknown model"),
    (["--data", "/no/such/dir"], "neither 'synthetic' nor a directory"),
    (["--preset", "huge"], "unknown preset"),
    (["--device", "nosuchbackend"], "unknown backend"),
])
def test_profile_cli_bad_settings_exit_2(app, args, message):
    r = CliRunner().invoke(app, ["profile", "--preset", "tiny", "--device", "cpu", *args])
    assert r.exit_code == 2
    assert message in r.output


def test_profile_cli_unknown_config_key_exit_2(app, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("preset: tiny\nbatchsize: 4\n")
    r = CliRunner().invoke(app, ["profile", "--config", str(cfg)])
    assert r.exit_code == 2 and "batchsize" in r.output


def test_profile_cli_old_flag_names_still_work_with_a_warning(app, tmp_path):
    out = tmp_path / "p.json"
    r = CliRunner().invoke(app, ["profile", "--preset", "seed", "--model", "tinycnn", "--size", "32", "--batch", "4",
                                 "--classes", "3", "--steps", "1", "--warmup", "0", "--free-steps", "0",
                                 "--device", "cpu", "--json", str(out)])
    assert r.exit_code == 0, r.output
    for old, new in [("--size", "--image-size"), ("--batch", "--batch-size"), ("--classes", "--num-classes"),
                     ("--preset seed", "--preset resnet50-224")]:
        assert f"{old} is deprecated; use {new}" in r.output
    wl = json.loads(out.read_text())["settings"]["workload"]
    assert (wl["batch"], wl["size"], wl["num_classes"]) == (4, 32, 3)
