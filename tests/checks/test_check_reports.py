"""One record, many renderers: JSON schema, JUnit XML, HTML with plots, Markdown, terminal, and the CLI."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET

import pytest
import typer
from typer.testing import CliRunner

from torchport.checks import CheckResult, Evidence, Report, Status
from torchport.checks.report import render_terminal, to_html, to_json, to_junit, to_markdown, write_reports


@pytest.fixture
def report():
    ok = CheckResult(name="amp", status=Status.PASS, summary="fine", seconds=0.5,
                     evidence=[Evidence(what="overflow step skipped", measured=True, threshold=True)],
                     series={"loss scale": [1024.0, 512.0, 512.0, 1024.0], "skipped": [0.0, 1.0, 0.0, 0.0]})
    bad = CheckResult.from_evidence("parity", [
        Evidence(what="loss after 8 steps (A vs B)", measured="2.1 vs 2.3", threshold="|dL| <= 1e-4", status=Status.FAIL,
                 where="first exceeded at step 4"),
        Evidence(what="first diverging module", measured="cosine 0.95", where="model.5 (step 4) <&>", status=Status.FAIL,
                 detail="execution order")], ok="", series={"loss A": [2.3, 2.2, 2.1], "loss B": [2.3, 2.25, 2.3]})
    warn = CheckResult(name="device-audit", status=Status.WARN, summary="plain attribute",
                       evidence=[Evidence(what="plain", measured=float("nan"), status=Status.WARN, where="model.0.mean")])
    skip = CheckResult(name="distributed", status=Status.SKIP, summary="no spec")
    return Report(results=[ok, bad, warn, skip], meta={"target": "t", "device": "cpu", "torch": "2.x", "seconds": 1.0})


def test_from_evidence_summary_names_the_first_problem(report):
    bad = report.results[1]
    assert bad.status is Status.FAIL and bad.summary.startswith("loss after 8 steps (A vs B) at first exceeded at step 4")
    assert "(+1 more)" in bad.summary
    assert report.exit_code == 1 and report.counts() == {"pass": 1, "skip": 1, "warn": 1, "fail": 1}


def test_json_schema(report):
    doc = json.loads(to_json(report))
    assert doc["format"] == "torchport-check/1" and doc["status"] == "fail"
    assert [c["name"] for c in doc["checks"]] == ["amp", "parity", "device-audit", "distributed"]
    for c in doc["checks"]:
        assert set(c) >= {"name", "status", "summary", "evidence", "series", "seconds", "platform"}
        assert c["status"] in {"pass", "warn", "fail", "skip"}
        for e in c["evidence"]:
            assert set(e) == {"what", "measured", "threshold", "where", "status", "detail"}
    assert doc["checks"][2]["evidence"][0]["measured"] == "nan"  # JSON has no NaN literal
    assert CheckResult.from_dict(doc["checks"][1]).to_dict() == doc["checks"][1]


def test_junit_parses_and_maps_statuses(report):
    root = ET.fromstring(to_junit(report).encode())
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["parity"].find("failure") is not None
    assert "model.5 (step 4) <&>" in cases["parity"].find("failure").text
    assert cases["distributed"].find("skipped") is not None
    assert cases["amp"].find("failure") is None
    assert cases["device-audit"].find("system-out").text.startswith("WARN: plain attribute")


def test_html_embeds_the_loss_overlay_and_scale_timeline(report):
    page = to_html(report)
    imgs = re.findall(r"<img alt='([^']+)' data-series='([^']+)' src='data:image/png;base64,([^']+)'>", page)
    assert {(alt, series) for alt, series, _ in imgs} == {
        ("loss overlay: A (reference) vs B", "loss A,loss B"), ("loss-scale timeline", "loss scale,skipped")}
    for _, _, b64 in imgs:
        assert base64.b64decode(b64)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "model.5 (step 4) &lt;&amp;&gt;" in page  # escaped


def test_markdown_and_terminal(report, tmp_path):
    from rich.console import Console

    md = to_markdown(report)
    assert md.startswith("# torchport check: FAIL") and "| parity | **fail** |" in md
    con = Console(record=True, width=160)
    render_terminal(report, con)
    text = con.export_text()
    assert "first diverging module" in text and "model.5 (step 4)" in text and "1 failed" in text
    written = write_reports(report, json=tmp_path / "r.json", junit=tmp_path / "r.xml", html=tmp_path / "r.html",
                            markdown=tmp_path / "r.md")
    assert [p.name for p in written] == ["r.json", "r.xml", "r.html", "r.md"]


def _app():
    from torchport.cli import check

    app = typer.Typer()
    check.register(app)

    @app.command("noop")  # a second command keeps typer in multi-command mode
    def _noop() -> None:
        pass

    return app


def test_cli_exit_codes_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    runner = CliRunner()
    app = _app()
    res = runner.invoke(app, ["check", "--only", "nonsense"])
    assert res.exit_code == 2 and "unknown check 'nonsense'" in res.output
    res = runner.invoke(app, ["check", "--target", "checks_targets:disabled_scaler", "--only", "amp", "--device", "cpu",
                              "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml")])
    assert res.exit_code == 1, res.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [("amp", "fail")]
    assert ET.parse(tmp_path / "r.xml").getroot().find("testsuite").get("failures") == "1"
    res = runner.invoke(app, ["check", "--target", "checks_targets:healthy", "--only", "data,amp", "--skip", "data",
                              "--device", "cpu", "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert "loss-scale timeline" in (tmp_path / "r.html").read_text()


def test_cli_parity_record_then_reference(tmp_path):
    runner = CliRunner()
    app = _app()
    ref = tmp_path / "ref.json"
    res = runner.invoke(app, ["check", "--only", "parity", "--steps", "3", "--record", str(ref), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["check", "--only", "parity", "--reference", str(ref), "--device", "cpu",
                              "--json", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "p.json").read_text())["checks"][0]["series"]["loss B"]
    res = runner.invoke(app, ["check", "--only", "parity", "--reference", str(tmp_path / "missing.json")])
    assert res.exit_code == 2


def test_html_folds_long_details_and_wraps():
    trace = "Traceback (most recent call last):\n" + "\n".join(f'  File "x{i}.py", line {i}' for i in range(60))
    ops = ", ".join(f"aten::op_{i}" for i in range(80))   # one long line
    r = CheckResult(name="device-audit", status=Status.FAIL, summary="x",
                    evidence=[Evidence(what="crash", measured="-", status=Status.FAIL, detail=trace, where=ops),
                              Evidence(what="short", measured=1, detail="fits <here>")])
    page = to_html(Report(results=[r], meta={}))
    assert page.count("<details>") == 2
    assert "<summary>Traceback (most recent call last):</summary>" in page and "line 59" in page
    assert "fits &lt;here&gt;</td>" in page                      # short text stays inline
    assert "overflow-wrap:anywhere" in page and "white-space:pre-wrap" in page
