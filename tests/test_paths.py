"""One path decision for every path option (issue 24 #1): a local path, a supported store URL, or one line.

Never a local folder named ``s3:`` -- ``--run-dir s3://b/run`` used to create one silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bad_inputs import bad_input
from torchport.cli.main import app
from torchport.errors import ConfigError, ExitCode
from torchport.paths import is_url, resolve

SRC = Path(__file__).resolve().parents[1] / "src" / "torchport"


def invoke(args):
    return CliRunner().invoke(app, args)


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_resolve_decides_once():
    assert resolve("runs/a", option="--run-dir") == Path("runs/a")
    assert resolve("file:///tmp/x", option="--run-dir") == Path("/tmp/x")
    assert resolve("C:/data", option="--data") == Path("C:/data")          # a drive letter is not a scheme
    assert resolve("s3://b/ck", option="--checkpoint-dir", remote=True) == "s3://b/ck"
    assert resolve("OBS://b/ck", option="--checkpoint-dir", remote=True) == "obs://b/ck"
    assert resolve(None, option="--resume") is None
    assert is_url("s3://b/x") and is_url(Path("x")) is False and not is_url("s3:/b/x")


@pytest.mark.parametrize("value, remote, words", [
    ("s3://b/run", False, "--run-dir must be a local path"),
    ("s3:/b/run", False, "--run-dir must be a local path"),            # what Path("s3://b/run") becomes
    ("gs://b/run", True, "gs:// is not supported"),
    ("https://host/x", True, "https:// is not supported"),
    ("s3:/b/x", True, "malformed object-store URL"),
    ("s3:b", True, "malformed object-store URL"),
    ("s3://", True, "malformed object-store URL"),
])
def test_resolve_refuses_in_one_line(value, remote, words):
    with pytest.raises(ConfigError) as exc:
        resolve(value, option="--run-dir", remote=remote)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_the_local_or_url_question_is_answered_in_one_place():
    """No module of its own decides "is this a URL?" (there were 4 private _is_url helpers in 9 files)."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "paths.py":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"def _?is_url\b", text) or re.search(r"split\(\"://\", 1\)\[0\]\.lower\(\) in", text):
            offenders.append(str(path.relative_to(SRC)))
    assert offenders == [], f"decide local-or-URL with torchport.paths, not in {offenders}"


def test_run_dir_url_is_refused_and_no_local_s3_folder_appears(cwd):
    res = invoke(["train", "--run-dir", "s3://bucket/run", "--device", "cpu", "--epochs", "1"])
    bad_input("train-run-dir-url", "--run-dir given an s3:// URL (logs stay local)",
              "torchport train --run-dir s3://bucket/run", res.exit_code, res.output, expect_code=ExitCode.USAGE,
              tmp=cwd, contains="must be a local path")
    assert "--checkpoint-dir" in res.output           # the fix: checkpoints may live in the store
    assert not (cwd / "s3:").exists() and not (cwd / "runs").exists()


def test_json_url_is_refused_before_training(cwd):
    res = invoke(["train", "--json", "s3://bucket/summary.json", "--device", "cpu", "--epochs", "1"])
    assert res.exit_code == ExitCode.USAGE and "--json must be a local path" in res.output, res.output
    assert not (cwd / "runs").exists() and not (cwd / "s3:").exists()     # refused before any run dir


def test_unsupported_scheme_for_data_is_refused(cwd):
    res = invoke(["train", "--data", "gs://bucket/imagenet", "--device", "cpu"])
    bad_input("train-data-unsupported-url", "--data with a URL scheme torchport does not speak",
              "torchport train --data gs://bucket/imagenet", res.exit_code, res.output, expect_code=ExitCode.USAGE,
              tmp=cwd, contains="gs:// is not supported")


def test_pack_destination_scheme_and_source_url(cwd):
    (cwd / "src" / "a").mkdir(parents=True)
    res = invoke(["data", "pack", str(cwd / "src"), "gs://bucket/shards"])
    assert res.exit_code == ExitCode.USAGE and "gs:// is not supported" in res.output, res.output
    res = invoke(["data", "pack", "s3://bucket/images", str(cwd / "out")])
    assert res.exit_code == ExitCode.USAGE and "SRC must be a local path" in res.output, res.output
    assert not (cwd / "out").exists() and not (cwd / "s3:").exists()


def test_doctor_store_needs_a_url(cwd):
    res = invoke(["doctor", "--store", str(cwd / "local")])
    assert res.exit_code == ExitCode.USAGE and "expects an object-store URL" in res.output, res.output


@pytest.mark.parametrize("args, words", [
    (["scan", ".", "-o", "json:s3://bucket/r.json"], "-o must be a local path"),
    (["scan", ".", "--json", "s3://bucket/r.json"], "--json must be a local path"),
    (["bench", "--data", "s3://bucket/images"], "--data must be a local path"),
])
def test_report_files_and_bench_data_refuse_urls_before_any_work(cwd, args, words):
    res = invoke(args)
    assert res.exit_code == ExitCode.USAGE and words in res.output, res.output
    assert "Traceback" not in res.output and not (cwd / "s3:").exists()


@pytest.mark.parametrize("verb", ["verify", "inspect"])
def test_data_verify_and_inspect_name_an_unsupported_url(cwd, verb):
    res = invoke(["data", verb, "gs://bucket/shards"])
    assert res.exit_code == ExitCode.USAGE, res.output
    assert "PATH gs://bucket/shards: gs:// is not supported" in res.output


@pytest.mark.parametrize("args", [["doctor", "--json", "s3://bucket/d.json"], ["profile", "--json", "s3://bucket/p.json"],
                                  ["data", "inspect", ".", "--json", "s3://bucket/i.json"]])
def test_every_json_option_refuses_a_url_while_parsing(cwd, args):
    res = invoke(args)
    assert res.exit_code == ExitCode.USAGE and "--json must be a local path" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and not (cwd / "s3:").exists()
