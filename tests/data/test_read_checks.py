"""Issue 24 (items 6, 7): data read is data checked.

* every sample read is checked against its packed crc32: a damaged sample is skipped and counted
  (``corrupt="skip"``) or stops the run (``"error"``), never returned as pixels;
* every index row and the manifest's keys are checked at open (shard id, byte range, label range,
  pixel count), so a tampered index is one line, never an IndexError/KeyError or a training traceback;
* an epoch that took no optimizer step is an error, never a successful run.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from bad_inputs import bad_input, probe_helpers
from torchport.cli.main import app
from torchport.data.dataset import ShardDataset
from torchport.data.errors import CorruptSampleError, SampleChecksumError, ShardFormatError
from torchport.data.format import ShardSet
from torchport.errors import ExitCode

reseal, garble = probe_helpers().reseal, probe_helpers().garble   # the probe battery's tampering, reused


@pytest.fixture(params=["predecoded", "jpeg"])
def garbled(request, tmp_path, shards):
    """A copy of a shard set with sample 5's bytes damaged (same size, header intact: quick checks pass)."""
    dst = tmp_path / request.param
    shutil.copytree(shards[request.param], dst)
    garble(dst, sample=5)
    return dst


def test_damaged_sample_is_skipped_and_counted_never_returned(garbled):
    ds = ShardDataset(garbled, verify="quick", size=32, train=False, corrupt="skip")
    batch = ds[(0, np.arange(8))]
    assert batch.indices.tolist() == [0, 1, 2, 3, 4, 6, 7]         # sample 5 dropped
    assert len(batch.skipped) == 1 and batch.skipped[0][0] == 5
    assert "crc32 mismatch" in batch.skipped[0][1] and "(sample 5)" in batch.skipped[0][1]
    assert batch.skipped[0][1].count("(sample 5)") == 1             # the location is named once


def test_damaged_sample_stops_the_run_under_corrupt_error(garbled):
    ds = ShardDataset(garbled, verify="quick", size=32, train=True, corrupt="error")
    with pytest.raises(CorruptSampleError, match=r"bad sample shard shard-\d+\.tps offset \d+ \(sample 5\).*crc32"):
        ds[(0, np.arange(8))]


def test_raw_read_checks_crc_and_verify_still_lists_every_damaged_sample(garbled):
    s = ShardSet.open(garbled, verify="quick")
    s.raw(4)                                                  # an intact neighbour reads fine
    for _ in range(2):       # a damaged sample is never remembered as verified
        with pytest.raises(SampleChecksumError, match=r"\(sample 5\).*crc32 mismatch"):
            s.raw(5)
    assert len(s.raw(5, check=False)) == int(s.index["nbytes"][5])   # the unchecked view is still there
    res = s.verify(full=False, samples=True)
    assert not res.ok and len(res.problems) == 1 and "(sample 5)" in res.problems[0]


def _set(col, value):
    def edit(idx):
        idx[col][3] = value
    return edit


@pytest.mark.parametrize("col,value,message", [
    ("label", 99, r"index row 3: label 99 is outside the 3 class\(es\) 0\.\.2"),
    ("label", -1, r"index row 3: label -1 is outside"),
    ("shard", 7, r"index row 3: shard id 7 but the manifest lists 1 shard"),
    ("offset", 10 ** 9, r"index row 3: bytes 1000000000\.\.\d+ lie past the end of its shard"),
    ("height", 999, r"index row 3: 999x\d+ pixels need \d+ bytes"),
])
def test_tampered_index_rows_are_refused_at_open(tmp_path, shards, col, value, message):
    root = tmp_path / "t"
    shutil.copytree(shards["predecoded"], root)
    reseal(root, edit_index=_set(col, value))
    for verify in ("none", "quick"):
        with pytest.raises(ShardFormatError, match=message):
            ShardSet.open(root, verify=verify)


@pytest.mark.parametrize("key", ["classes", "shards", "index", "num_samples"])
def test_manifest_missing_a_key_is_one_line(tmp_path, shards, key):
    root = tmp_path / "t"
    shutil.copytree(shards["jpeg"], root)
    reseal(root, edit_manifest=lambda m: m.pop(key))
    with pytest.raises(ShardFormatError, match=rf"manifest key '{key}' .* is missing or malformed"):
        ShardSet.open(root, verify="none")


def test_verify_and_train_refuse_a_label_outside_the_classes(tmp_path, shards):
    data = tmp_path / "data"
    shutil.copytree(shards["predecoded"], data / "train")
    reseal(data / "train", edit_index=_set("label", 99))
    res = CliRunner().invoke(app, ["data", "verify", str(data / "train")])
    assert res.exit_code == ExitCode.FAILED and "label 99 is outside" in res.output, res.output
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--model", "tinycnn", "--image-size", "32",
                                   "--batch-size", "4", "--epochs", "1", "--workers", "0", "--progress", "none",
                                   "--run-dir", str(tmp_path / "run")])
    bad_input("shards-label-out-of-range", "a shard index row whose label is outside the class list",
              "torchport train --data DIR", res.exit_code, res.output, expect_code=ExitCode.DATA, tmp=tmp_path,
              contains="label 99")


def test_manifest_without_shards_key_is_one_line_for_verify(tmp_path, shards):
    root = tmp_path / "t"
    shutil.copytree(shards["jpeg"], root)
    reseal(root, edit_manifest=lambda m: m.pop("shards"))
    res = CliRunner().invoke(app, ["data", "inspect", str(root)])
    bad_input("shards-manifest-missing-key", "a shard manifest (index.json) without its 'shards' key",
              "torchport data inspect DIR", res.exit_code, res.output, expect_code=ExitCode.FAILED, tmp=tmp_path,
              contains="'shards'")


def test_an_epoch_without_a_single_step_is_an_error(tmp_path):
    """Every file unreadable (policy skip): the run used to 'finish' with exit 0 after 0 steps."""
    for cls in ("a", "b"):
        (tmp_path / "junk" / cls).mkdir(parents=True)
        for i in range(10):
            (tmp_path / "junk" / cls / f"{i}.jpg").write_bytes(bytes(range(256)) * 2)
    res = CliRunner().invoke(app, ["train", "--data", str(tmp_path / "junk"), "--model", "tinycnn", "--image-size",
                                   "32", "--batch-size", "4", "--epochs", "1", "--workers", "0", "--progress", "none",
                                   "--run-dir", str(tmp_path / "run")])
    bad_input("train-zero-steps", "every training image unreadable (--bad-files skip): an epoch of zero steps",
              "torchport train --data DIR", res.exit_code, res.output, expect_code=ExitCode.DATA, tmp=tmp_path,
              contains="took no optimizer step")
    assert not (tmp_path / "run" / "summary.json").exists()
