"""``--run-dir`` / ``--checkpoint-dir`` (or ``run_dir:`` / ``checkpoint_dir:`` in a config) naming the
filesystem root or the home folder is refused in one line, exit 2, before anything is written (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from torchport.cli.main import app
from torchport.errors import ConfigError, ExitCode
from torchport.train import rundir


@pytest.mark.parametrize("option", ["--run-dir", "--checkpoint-dir"])
def test_home_folder_is_refused(tmp_path, monkeypatch, option):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["train", option, str(home), "--device", "cpu", "--epochs", "1",
                                   "--model", "tinycnn", "--image-size", "16", "--workers", "0"])
    assert res.exit_code == ExitCode.USAGE, res.output
    assert "Traceback" not in res.output
    assert [ln for ln in res.output.splitlines() if "error:" in ln and option in ln and "home folder" in ln]
    assert list(home.iterdir()) == [], "something was written into the home folder"


@pytest.mark.parametrize("spelling", ["/", "//", "/tmp/..", "~"])
def test_root_and_home_spellings_are_refused(spelling, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="--run-dir"):
        rundir._refuse_broad(spelling, "--run-dir")
    rundir._refuse_broad(str(tmp_path / "runs"), "--run-dir")       # a sub-folder is fine
    rundir._refuse_broad("s3://b/ckpt", "--checkpoint-dir")          # a store prefix is not a local folder
    assert Path(spelling).expanduser().resolve() in (Path("/"), tmp_path.resolve())
