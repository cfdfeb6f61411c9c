"""JSON / TOML / YAML from elsewhere go through one parser with size and depth limits (issue 36):
each hostile document is one ``error:`` line with the verb's documented exit code, never a traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from torchport._parse import ParseError, depth, loads
from torchport.cli.main import app

DEEP_JSON = "[" * 100_000 + "]" * 100_000
CUDA = "import torch\nx = torch.randn(3).cuda()\n"


@pytest.mark.parametrize("fmt,text", [
    ("json", DEEP_JSON),
    ("json", "[" * 65 + "]" * 65),                       # parses in Python, still past the limit
    ("toml", "x = " + "[" * 5000 + "]" * 5000 + "\n"),
    ("yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n"),
])
def test_deep_documents_are_refused(fmt, text):
    with pytest.raises(ParseError, match="nested deeper than 64 levels") as exc:
        loads(text, fmt=fmt, what="doc")
    assert "\n" not in str(exc.value)


def test_limits_hold_and_plain_data_passes(monkeypatch):
    assert loads('{"a": [1, {"b": 2}]}', fmt="json", what="d") == {"a": [1, {"b": 2}]}
    assert loads("[" * 64 + "]" * 64, fmt="json", what="d") is not None     # exactly at the limit
    assert depth({"a": [[1]]}) == 3 and depth(5) == 0
    with pytest.raises(ParseError, match="not valid JSON"):
        loads("1" * 5000, fmt="json", what="d")                          # past Python's int digit limit
    with pytest.raises(ParseError, match="refused"):
        loads("a: !!python/object/apply:os.system ['true']\n", fmt="yaml", what="d")
    with pytest.raises(ParseError, match="not UTF-8"):
        loads(b"\xff\xfe{", fmt="json", what="d")
    monkeypatch.setenv("TORCHPORT_PARSE_MAX_BYTES", "100")
    with pytest.raises(ParseError, match="101 bytes is more than the 100"):
        loads(b" " * 101, fmt="json", what="d")


def _one_line(res, code, words):
    assert "Traceback" not in res.output, res.output[-2000:]
    assert res.exit_code == code, res.output[-2000:]
    lines = [ln for ln in res.output.splitlines() if "error:" in ln]
    assert len(lines) == 1 and words in lines[0], res.output[-2000:]


def test_data_inspect_deep_index_json(tmp_path, monkeypatch):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "index.json").write_text(DEEP_JSON)
    monkeypatch.chdir(tmp_path)
    _one_line(CliRunner().invoke(app, ["data", "inspect", "ds"]), 1, "nested deeper")


@pytest.mark.parametrize("body,words", [("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
                                        ("model: !!python/object/apply:os.system ['touch ran']\n", "refused")])
def test_profile_config_deep_or_tagged(tmp_path, monkeypatch, body, words):
    (tmp_path / "c.yaml").write_text(body)
    monkeypatch.chdir(tmp_path)
    _one_line(CliRunner().invoke(app, ["profile", "--config", "c.yaml", "--steps", "1"]), 2, words)
    assert not (tmp_path / "ran").exists()


def test_bench_compare_deep_report(tmp_path, monkeypatch):
    (tmp_path / "a.json").write_text(DEEP_JSON)
    monkeypatch.chdir(tmp_path)
    _one_line(CliRunner().invoke(app, ["bench", "compare", "a.json", "a.json"]), 2, "nested deeper")


def test_scan_repository_with_deep_pyproject(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.torchport]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "a.py").write_text(CUDA)
    monkeypatch.chdir(tmp_path)
    _one_line(CliRunner().invoke(app, ["scan", "a.py"]), 2, "nested deeper")


def test_check_reference_deep_is_a_refusal(tmp_path, monkeypatch):
    (tmp_path / "ref.json").write_text(json.dumps({"format": "x"})[:-1] + ', "n": ' + DEEP_JSON + "}")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["check", "--only", "parity", "--device", "cpu", "--reference", "ref.json"])
    _one_line(res, 5, "nested deeper")
