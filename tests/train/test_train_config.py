"""TrainConfig: one typed config for flags, YAML/TOML files and the Python API; unknown keys are errors."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from torchport.runtime.device import ConfigError
from torchport.train.config import TrainConfig


def test_defaults_are_valid_and_plain_data():
    cfg = TrainConfig()
    d = cfg.to_dict()
    assert d["model"] == "tinycnn" and d["precision"] == "auto" and d["data"] is None
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in d.values())
    assert TrainConfig.from_dict(d) == cfg


def test_keyword_only():
    with pytest.raises(TypeError):
        TrainConfig("resnet18")  # type: ignore[misc]


def test_unknown_key_is_an_error_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown key 'epoch'.*epochs"):
        TrainConfig.from_dict({"epoch": 3})
    with pytest.raises(TypeError):
        TrainConfig(epoch=3)  # type: ignore[call-arg]


@pytest.mark.parametrize("key, value, message", [
    ("epochs", "3", "must be an int"),
    ("epochs", True, "must be an int"),
    ("epochs", 0, ">= 1"),
    ("precision", "fp8", "not one of"),
    ("bad_files", "ignore", "skip, error"),
    ("lr", -1.0, "lr must be > 0"),
    ("model", None, "must be set"),
])
def test_bad_values_name_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict({key: value})


def test_int_is_accepted_for_float_and_kebab_keys_for_snake():
    cfg = TrainConfig.from_dict({"lr": 1, "batch-size": 4})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float) and cfg.batch_size == 4


def test_yaml_and_toml_files_with_overrides(tmp_path):
    y = tmp_path / "run.yaml"
    y.write_text("model: resnet50\nepochs: 2\nlr: 0.01\nchannels_last: true\n")
    cfg = TrainConfig.from_file(y, epochs=5)
    assert (cfg.model, cfg.epochs, cfg.lr, cfg.channels_last) == ("resnet50", 5, 0.01, True)
    t = tmp_path / "run.toml"
    t.write_text('model = "mobilenet_v3_small"\nbatch_size = 16\nclip_grad_norm = 1.0\n')
    cfg = TrainConfig.from_file(t)
    assert (cfg.model, cfg.batch_size, cfg.clip_grad_norm) == ("mobilenet_v3_small", 16, 1.0)
    assert TrainConfig.from_file(_write(tmp_path / "back.yaml", cfg.to_yaml())) == cfg


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, text, message", [
    ("a.yaml", "epochz: 1\n", "unknown key 'epochz'"),
    ("b.yaml", "- 1\n- 2\n", "must hold a mapping"),
    ("c.json", "{}", "unknown extension"),
    ("d.toml", "epochs = \n", "could not be parsed"),
])
def test_bad_config_files(tmp_path, name, text, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_file(_write(tmp_path / name, text))
    with pytest.raises(ConfigError, match="does not exist"):
        TrainConfig.from_file(tmp_path / "missing.yaml")


def _app():
    from torchport.cli import train as train_cli

    app = typer.Typer()
    train_cli.register(app)

    @app.command("other")
    def _other() -> None:  # a second command keeps "train" as a sub-command
        pass

    return app


def test_every_field_is_a_flag():
    from torchport.cli.train import _config_params

    assert {p.name for p in _config_params()} == {f.name for f in dataclasses.fields(TrainConfig)}


def test_cli_precedence_defaults_file_flags(tmp_path):
    cfg_file = _write(tmp_path / "run.yaml", "epochs: 7\nlr: 0.5\nchannels_last: true\n")
    res = CliRunner().invoke(_app(), ["train", "--config", str(cfg_file), "--lr", "0.25", "--no-channels-last",
                                      "--print-config"])
    assert res.exit_code == 0, res.output
    import yaml

    printed = yaml.safe_load(res.stdout)
    assert printed["epochs"] == 7            # from the file
    assert printed["lr"] == 0.25             # flag beats file
    assert printed["channels_last"] is False  # explicit --no- flag beats file
    assert printed["batch_size"] == TrainConfig().batch_size   # default


def test_cli_bad_config_exit_code(tmp_path):
    res = CliRunner().invoke(_app(), ["train", "--config", str(_write(tmp_path / "x.yaml", "nope: 1\n"))])
    assert res.exit_code == 2
    assert "unknown key 'nope'" in res.output
    res = CliRunner().invoke(_app(), ["train", "--precision", "fp8", "--print-config"])
    assert res.exit_code == 2 and "fp8" in res.output
