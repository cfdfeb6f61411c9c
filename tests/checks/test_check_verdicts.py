"""Verdicts that prove nothing say so (issue 24 #3): parity recorded and replayed on the same device and the
device audit on a CPU-only machine are SKIP with the reason -- in every report format -- and exit 0."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from checks_targets import healthy
from torchport.checks import Status, device_audit, parity
from torchport.checks.report import RENDERERS
from torchport.checks.result import Report
from torchport.cli.main import app


@pytest.fixture(scope="module")
def same_device_results(tmp_path_factory):
    from torchport.runtime.device import select_device

    cpu = select_device("cpu", warn=False)
    ref = tmp_path_factory.mktemp("ref") / "ref.json"
    parity(healthy(), device=cpu, record=ref, steps=3)
    return [parity(healthy(), device=cpu, reference=ref),
            device_audit(healthy(), device=cpu, steps=1, expect_accelerator=False)]


def test_same_device_parity_and_cpu_audit_are_skips_with_the_reason(same_device_results):
    replay, audit = same_device_results
    assert replay.status is Status.SKIP and replay.ok
    assert replay.summary.startswith("same device") and "recorded on cpu and replayed on cpu" in replay.summary
    assert audit.status is Status.SKIP and "cannot tell" in audit.summary
    assert Report(results=same_device_results).exit_code == 0


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_every_format_shows_skip_and_why(same_device_results, fmt):
    text = RENDERERS[fmt](Report(results=same_device_results, meta={"target": "t", "device": "cpu"}))
    assert "same device" in text and "cannot tell" in text
    if fmt == "json":
        doc = json.loads(text)
        assert [c["status"] for c in doc["checks"]] == ["skip", "skip"] and doc["counts"]["pass"] == 0
    elif fmt == "junit":
        root = ET.fromstring(text)
        skipped = [c.find("skipped") for c in root.iter("testcase")]
        assert root.get("skipped") == "2" and all(s is not None for s in skipped)
        assert "same device" in skipped[0].get("message") and "cannot tell" in skipped[1].get("message")
    elif fmt == "html":
        assert text.count("<td class='skip'>skip</td>") >= 2 and "<h1>torchport check: <span class='skip'>" in text
    else:
        assert "0 passed, 0 warned, 0 failed, 2 skipped" in text


def test_check_cli_on_cpu_says_skip_and_exits_0(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["check", "--only", "device-audit", "--device", "cpu", "-o", "r.json"],
                             env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "SKIP" in res.stdout and "cannot tell" in res.stdout and "0 passed" in res.stdout
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "skip"
