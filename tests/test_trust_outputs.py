"""Secrets never printed, reports escaped, names from remote content confined (issue 36 items 3, 4, 6)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchport._escape import csv_cell, md_code, uri_ref, xml_text
from torchport.redact import redact, redact_obj

SECRET, KEY_ID = "s3cr3tpassword", "AKIAABCDEFGHIJKLMNOP"


@pytest.mark.parametrize("text,gone", [
    ("endpoint http://bob:hunter2xyz@127.0.0.1:9000/x", "hunter2xyz"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F2026&X-Amz-Signature=deadbeefcafe", "deadbeefcafe"),
    ("https://h/k?X-Amz-Security-Token=FwoGZXIvYXdzEJr&x=1", "FwoGZXIvYXdzEJr"),
    (f"key {KEY_ID} used", KEY_ID),
])
def test_redact_hides_userinfo_query_credentials_and_key_ids(text, gone):
    out = redact(text)
    assert gone not in out and "***" in out
    assert redact_obj({"a": [text], text: 1}) == {"a": [out], out: 1}


def test_redact_hides_the_values_of_the_credential_variables(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert redact(f"signing with {SECRET}!") == "signing with ***!"
    assert redact("http://127.0.0.1:9000/plain") == "http://127.0.0.1:9000/plain"     # nothing else touched


def test_doctor_never_prints_a_secret_in_text_or_json(tmp_path):
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://user:{SECRET}@127.0.0.1:9", "AWS_ACCESS_KEY_ID": KEY_ID,
           "AWS_SECRET_ACCESS_KEY": "another-secret-value", "PYTHONWARNINGS": "ignore",
           "TORCHPORT_STORAGE_TIMEOUT_S": "1"}
    p = subprocess.run([sys.executable, "-m", "torchport", "doctor", "--store", "s3://b/x", "--json",
                        str(tmp_path / "d.json")], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    written = p.stdout + p.stderr + (tmp_path / "d.json").read_text()
    assert "127.0.0.1:9" in written                         # the endpoint is shown ...
    for secret in (SECRET, KEY_ID, "another-secret-value"):
        assert secret not in written                        # ... its credentials never


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted_as_text():
    for bad in ("=HYPERLINK(\"http://x\")+1.py", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(bad) == "'" + bad
    assert csv_cell("src/a.py") == "src/a.py" and csv_cell(3) == 3


def test_scan_csv_and_sarif_escape_a_hostile_file_name(tmp_path):
    (tmp_path / "=HYPERLINK(1)+1.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    (tmp_path / "with space.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    run = lambda fmt: subprocess.run([sys.executable, "-m", "torchport", "scan", ".", "--output-format", fmt],
                                     capture_output=True, text=True, cwd=tmp_path, timeout=120).stdout
    rows = list(csv.reader(io.StringIO(run("csv"))))[1:]
    assert rows and all(not r[0].startswith(("=", "+", "-", "@")) for r in rows)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(run("sarif"))["runs"][0]["results"]}
    assert "with%20space.py" in uris and all(" " not in u for u in uris)


def test_markdown_code_span_cannot_be_closed_and_junit_has_no_control_characters():
    span = md_code("a`b <script>x</script>")
    assert span.startswith("``") and span.endswith("``") and "a`b" in span
    assert xml_text("ok\x1b[31m\x00") == "ok\ufffd[31m\ufffd"
    assert uri_ref("dir/with space#1.py") == "dir/with%20space%231.py"


def test_check_markdown_report_with_a_hostile_target_name():
    from torchport.checks.report.text import to_markdown
    from torchport.checks.result import CheckResult, Report, Status

    report = Report(results=[CheckResult(name="audit", status=Status.PASS, summary="fine <b>|x")],
                    meta={"target": "t`<script>alert(1)</script>`", "device": "cpu"})
    md = to_markdown(report)
    target_line = next(ln for ln in md.splitlines() if ln.startswith("Target"))
    fence = target_line.split("Target ")[1].split("t")[0]
    assert len(fence) >= 2                                   # longer than the backtick run inside: stays one span
    assert "<b>" not in md and "fine &lt;b&gt;\\|x" in md


def test_check_terminal_report_shows_hostile_names_as_text():
    from torchport.checks.report.text import to_text
    from torchport.checks.result import CheckResult, Evidence, Report, Status

    bad = "x\x1b]0;pwned\x07\x1b[31m\nFAKE [red]y"
    ev = Evidence(what=f"unreadable {bad}", measured=bad, where=f"data/{bad}.jpg", status=Status.FAIL, detail=bad)
    report = Report(results=[CheckResult(name="data", status=Status.FAIL, summary=bad, evidence=[ev])],
                    meta={"target": bad, "device": bad})
    text = to_text(report, width=400)
    assert "\x1b" not in text and "\x07" not in text
    assert "x\\x1b]0;pwned\\x07\\x1b[31m\\x0aFAKE [red]y" in text            # shown, markup not applied
    assert not any(ln.startswith("FAKE") for ln in text.splitlines())


def _manifest(tmp_path, edit):
    from torchport.data.pack import pack_splits
    from torchport.data.synth import make_dataset

    make_dataset(tmp_path / "src", classes=2, train_per_class=4, val_per_class=1, size=16)
    pack_splits(tmp_path / "src", tmp_path / "shards", mode="predecoded", workers=1, size=16)
    m = tmp_path / "shards" / "train" / "index.json"
    doc = json.loads(m.read_text())
    edit(doc)
    m.write_text(json.dumps(doc))
    return m.parent


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["index"].update(sha256="../../../../x/pwned"), "64 hex digits"),
    (lambda d: d["shards"][0].update(sha256="../../evil"), "64 hex digits"),
    (lambda d: d["index"].update(file="../x/index.npy"), "leaves the shard directory"),
    (lambda d: d["index"].update(file="/etc/passwd"), "leaves the shard directory"),
])
def test_a_manifest_naming_paths_outside_its_directory_is_refused(tmp_path, edit, match):
    from torchport.data.format import ShardFormatError, ShardSet

    root = _manifest(tmp_path, edit)
    with pytest.raises(ShardFormatError, match=match):
        ShardSet.open(root)


def test_a_cache_key_from_remote_content_cannot_leave_the_cache(tmp_path):
    from torchport.errors import StorageError
    from torchport.storage.cache import BlockCache

    cache = BlockCache(tmp_path / "c")
    for key in ("../../x/pwned", "a/b", ".hidden"):
        with pytest.raises(StorageError, match="not a plain file name"):
            cache.read(key, lambda: b"bytes")
    assert not (tmp_path / "x").exists()


def test_a_second_data_pack_into_the_same_output_exits_9_naming_the_first(tmp_path):
    from torchport.data.synth import make_dataset
    from torchport.train.lock import output_lock

    make_dataset(tmp_path / "src", classes=2, train_per_class=3, val_per_class=1, size=16)
    with output_lock(tmp_path / "out" / "train"):
        p = subprocess.run([sys.executable, "-m", "torchport", "data", "pack", "src", "out", "--workers", "1"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 9, p.stderr
    assert f"out{os.sep}train is in use by another data pack (pid {os.getpid()}" in p.stderr
    assert not (tmp_path / "out" / "train.partial").exists() and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "torchport", "data", "pack", "src", "out", "--workers", "1"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0 and (tmp_path / "out" / "train" / "index.json").is_file()
