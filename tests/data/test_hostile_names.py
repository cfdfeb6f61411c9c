"""Issue 36: names read from a data set (class folders, file names) reach the terminal as text, never as
escape sequences, extra lines or rich markup (``data pack`` / ``data inspect``; :func:`torchport._escape.terminal_name`)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from torchport._escape import terminal_name
from torchport.cli.main import app

CLASS = "cls\x1b[31m\nFAKE LINE [red]x"            # ANSI colour, a newline, rich markup
BAD_FILE = "bad\x1b]0;pwned\x07\nfile.jpg"          # OSC (sets the terminal title), BEL, a newline


def test_terminal_name_shows_control_characters_and_markup():
    assert terminal_name(CLASS) == "cls\\x1b[31m\\x0aFAKE LINE \\[red]x"
    assert terminal_name("tab\there\u2028") == "tab\\x09here\\u2028"
    assert terminal_name("plain-name_1.jpg") == "plain-name_1.jpg"


def test_pack_and_inspect_print_hostile_names_escaped(tmp_path, monkeypatch):
    from torchport.data.synth import make_dataset

    monkeypatch.setenv("COLUMNS", "400")
    src = tmp_path / "src"
    make_dataset(src, classes=2, train_per_class=3, val_per_class=0, size=24)
    train = src / "train" if (src / "train").is_dir() else src
    first = sorted(p for p in train.iterdir() if p.is_dir())[0]
    first.rename(train / CLASS)
    (train / CLASS / BAD_FILE).write_bytes(b"not a jpeg")
    runner = CliRunner()
    r = runner.invoke(app, ["data", "pack", str(train), str(tmp_path / "sh"), "--workers", "1",
                            "--json", str(tmp_path / "pack.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "pack.json").read_text())["all"]["skipped"] == 1
    assert "\x1b" not in r.output and "\x07" not in r.output
    assert "bad\\x1b]0;pwned\\x07\\x0afile.jpg" in r.output             # the skipped file, shown on one line
    r = runner.invoke(app, ["data", "inspect", str(tmp_path / "sh"), "--json", str(tmp_path / "i.json")])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "FAKE LINE" not in r.output.replace("\\x0aFAKE LINE", "")
    assert "cls\\x1b[31m\\x0aFAKE LINE [red]x:3" in r.output            # markup shown as text, not applied
    assert CLASS in json.loads((tmp_path / "i.json").read_text())["all"]["per_class"]   # JSON keeps the real name
