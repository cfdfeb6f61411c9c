"""Bad inputs to the verbs: one clear line and a documented exit code, never a traceback (issue 16 #3).

Each case is also a row of docs/bad-inputs.md (see tests/bad_inputs.py).
"""

from __future__ import annotations

import shutil

import pytest
import torch
from typer.testing import CliRunner

from bad_inputs import bad_input
from torchport.errors import ExitCode
from torchport.cli.main import app


def invoke(args, env=None):
    return CliRunner().invoke(app, args, env=env)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory):
    from torchport.data.synth import make_dataset

    root = tmp_path_factory.mktemp("small") / "data"
    make_dataset(root, classes=2, train_per_class=4, val_per_class=2, size=16)
    return root


def test_unknown_device(cache):
    res = invoke(["train", "--device", "tpu"])
    bad_input("train-unknown-device", "unknown device name", "torchport train --device tpu", res.exit_code,
              res.output, expect_code=ExitCode.USAGE, contains="unknown backend 'tpu'")


def test_unavailable_npu(cache):
    res = invoke(["train", "--device", "npu"])
    bad_input("train-device-npu-unavailable", "--device npu without torch_npu", "torchport train --device npu",
              res.exit_code, res.output, expect_code=ExitCode.USAGE, contains="'npu' is not available")


def test_unavailable_cuda(cache):
    res = invoke(["train", "--device", "cuda", "--print-config"])   # the device is resolved only by a run
    assert res.exit_code == 0
    if torch.cuda.is_available():        # on a GPU machine cuda *is* available: use a bad index instead
        count = torch.cuda.device_count()
        res = invoke(["train", "--device", f"cuda:{count}", "--epochs", "1", "--max-steps", "1"])
        assert res.exit_code == ExitCode.USAGE and "Traceback" not in res.output, res.output
        return
    res = invoke(["train", "--device", "cuda"])
    bad_input("train-device-cuda-unavailable", "--device cuda on a machine without CUDA", "torchport train --device cuda",
              res.exit_code, res.output, expect_code=ExitCode.USAGE, contains="'cuda' is not available")


def test_require_accelerator_without_one(cache):
    if torch.cuda.is_available():
        res = invoke(["train", "--device", "cpu", "--print-config"], env={"TORCHPORT_REQUIRE_ACCELERATOR": "1"})
        assert res.exit_code == 0
        return
    res = invoke(["train"], env={"TORCHPORT_REQUIRE_ACCELERATOR": "1"})
    bad_input("train-require-accelerator", "TORCHPORT_REQUIRE_ACCELERATOR=1, no accelerator",
              "TORCHPORT_REQUIRE_ACCELERATOR=1 torchport train", res.exit_code, res.output,
              expect_code=ExitCode.NO_ACCELERATOR, contains="no accelerator is available")


def test_unknown_model_is_reported_before_data_checks(cache, small_folder):
    res = invoke(["train", "--data", str(small_folder), "--model", "notamodel", "--batch-size", "100000",
                  "--device", "cpu"])
    bad_input("train-unknown-model", "unknown model (and an impossible batch size)",
              "torchport train --model notamodel --batch-size 100000", res.exit_code, res.output,
              expect_code=ExitCode.USAGE, contains="model 'notamodel'")


def test_unwritable_run_dir(cache, small_folder):
    blocker = cache / "file"
    blocker.write_text("not a directory")
    res = invoke(["train", "--data", str(small_folder), "--device", "cpu", "--run-dir", str(blocker / "run"),
                  "--batch-size", "2", "--epochs", "1"])
    bad_input("train-unwritable-run-dir", "--run-dir under a regular file", "torchport train --run-dir FILE/run",
              res.exit_code, res.output, expect_code=ExitCode.IO, tmp=cache, contains="cannot write the run directory")


def test_unwritable_pack_destination(cache, small_folder):
    blocker = cache / "file"
    blocker.write_text("not a directory")
    res = invoke(["data", "pack", str(small_folder / "val"), str(blocker / "out")])
    bad_input("pack-unwritable-destination", "pack destination under a regular file",
              "torchport data pack SRC FILE/out", res.exit_code, res.output, expect_code=ExitCode.IO, tmp=cache,
              contains="cannot write")


def test_missing_data_dir(cache):
    res = invoke(["train", "--data", str(cache / "nowhere"), "--device", "cpu"])
    bad_input("train-missing-data", "--data directory that does not exist", "torchport train --data nowhere",
              res.exit_code, res.output, expect_code=ExitCode.DATA, tmp=cache, contains="does not exist")


def test_scan_unparsable_file(cache):
    (cache / "broken.py").write_text("x = torch.cuda(\n")
    res = invoke(["scan", "broken.py", "--exit-zero"])
    bad_input("scan-unparsable", "a Python file that does not parse (with --exit-zero)",
              "torchport scan broken.py --exit-zero", res.exit_code, res.output, expect_code=ExitCode.IO,
              contains="broken.py")


def test_warnings_have_no_source_paths(cache, small_folder):
    """Issue 16 #9: CLI warnings are one line without `/path/file.py:NN:` and the source line."""
    if torch.cuda.is_available():
        return        # no CPU-fallback warning where an accelerator is present; nothing to look at
    res = invoke(["train", "--data", str(small_folder), "--run-dir", str(cache / "run"), "--batch-size", "2",
                  "--epochs", "1", "--model", "tinycnn", "--workers", "0", "--image-size", "16"])
    assert res.exit_code == 0, res.output
    warn_lines = [ln for ln in res.output.splitlines() if "warning" in ln.lower()]
    assert any("no accelerator found" in ln for ln in warn_lines), res.output
    assert not [ln for ln in warn_lines if ".py:" in ln], warn_lines
    assert "target = select_device" not in res.output


def test_every_verb_runs_inside_the_error_guard():
    """A verb registered without the guard would print tracebacks for known errors."""
    from torchport.cli.main import app as root

    def walk(typer_app):
        for info in typer_app.registered_commands:
            yield info.callback
        for group in typer_app.registered_groups:
            yield from walk(group.typer_instance)

    callbacks = list(walk(root))
    assert len(callbacks) >= 10
    assert all(getattr(cb, "torchport_guard", None) for cb in callbacks), [cb.__qualname__ for cb in callbacks]


def test_zero_byte_image_and_png_named_jpg(cache, small_folder):
    """A zero-byte .jpg is named as empty (exit 3 under --bad-files error); a PNG named .jpg trains fine."""
    import io

    from PIL import Image

    data = cache / "imgs"
    shutil.copytree(small_folder, data)
    victim = sorted((data / "train").glob("*/*.jpg"))[0]
    png = sorted((data / "train").glob("*/*.jpg"))[-1]
    buf = io.BytesIO()
    Image.open(png).save(buf, format="PNG")
    png.write_bytes(buf.getvalue())
    common = ["train", "--data", str(data), "--device", "cpu", "--batch-size", "2", "--epochs", "1",
              "--image-size", "16", "--model", "tinycnn", "--workers", "0"]
    ok = invoke(common + ["--run-dir", str(cache / "ok")])
    assert ok.exit_code == 0, ok.output
    victim.write_bytes(b"")
    res = invoke(common + ["--run-dir", str(cache / "bad"), "--bad-files", "error"])
    bad_input("train-zero-byte-image", "a zero-byte .jpg with --bad-files error", "torchport train --bad-files error",
              res.exit_code, res.output, expect_code=ExitCode.DATA, tmp=cache, contains="empty file")
    skip = invoke(common + ["--run-dir", str(cache / "skip")])
    assert skip.exit_code == 0 and "empty file (0 bytes)" in skip.output and "BytesIO" not in skip.output, skip.output
