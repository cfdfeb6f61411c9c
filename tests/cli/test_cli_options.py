"""The CLI vocabulary, frozen: every verb's options in a committed snapshot, and the shared spelling rules.

A new, renamed or removed option fails ``test_cli_options_match_the_snapshot`` until the snapshot is
updated on purpose: ``pytest --update-golden tests/cli/test_cli_options.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from torchport.cli.main import app, command

SNAPSHOT = Path(__file__).resolve().parent / "cli_options.json"

#: Spellings the vocabulary forbids for visible options (old names live on as hidden aliases).
FORBIDDEN = {"--batch", "--size", "--classes", "--report-file", "--expect-accelerator"}


def _commands(cmd, path=()):
    subs = getattr(cmd, "commands", None) or {}
    if path:
        yield " ".join(path), cmd
    for name in sorted(subs):
        yield from _commands(subs[name], (*path, name))


def snapshot() -> dict:
    out = {}
    for name, cmd in _commands(command()):
        opts, hidden, args = [], [], []
        for p in cmd.params:
            if p.param_type_name == "argument":
                args.append(p.name.upper())
                continue
            names = "/".join([*p.opts, *p.secondary_opts])
            (hidden if p.hidden else opts).append(names)
        out[name] = {"arguments": args, "options": sorted(opts), "deprecated_aliases": sorted(hidden)}
        if getattr(cmd, "hidden", False):
            out[name]["hidden"] = True
    return out


def test_cli_options_match_the_snapshot():
    actual = json.dumps(snapshot(), indent=2, sort_keys=True) + "\n"
    if os.environ.get("TORCHPORT_UPDATE_GOLDEN") == "1":
        SNAPSHOT.write_text(actual)
    assert SNAPSHOT.is_file(), f"{SNAPSHOT} missing: create it with pytest --update-golden"
    assert actual == SNAPSHOT.read_text(), (
        "the CLI options changed; if on purpose, update the snapshot with pytest --update-golden "
        "and keep the old spelling as a hidden deprecated alias")


def test_one_vocabulary_in_every_verb():
    snap = snapshot()
    for verb, info in snap.items():
        flat = {n for o in info["options"] for n in o.split("/")}
        assert not flat & FORBIDDEN, f"{verb}: {sorted(flat & FORBIDDEN)}"
        if "--device" in flat:   # default auto, backend list from the registry
            opt = next(p for p in dict(_commands(command()))[verb].params if "--device" in getattr(p, "opts", []))
            from torchport.backends import registry

            assert (opt.default or "auto") == "auto" or verb == "train", verb
            assert all(n in opt.help for n in registry.names()), verb
    for verb in ("run", "check", "train", "bench", "profile"):
        flat = {n for o in snap[verb]["options"] for n in o.split("/")}
        assert {"--device", "--require-accelerator", "--json"} <= flat, verb
    for verb in ("train", "bench", "profile"):
        flat = {n for o in snap[verb]["options"] for n in o.split("/")}
        assert {"--batch-size", "--image-size", "--num-classes", "--precision"} <= flat, verb


def test_help_is_plain_keeps_choices_and_has_no_bool_metavar():
    out = subprocess.run([sys.executable, "-m", "torchport", "train", "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, timeout=120)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "<bool>" not in text and "╭" not in text and "--print-config Print" in text
    assert "One of: sgd | adamw." in text and "One of: fp32 | fp16 | bf16 | auto | amp." in text
    train = dict(_commands(command()))["train"]
    for p in train.params:   # the default is said once (in our text; typer adds none)
        said = (p.help or "").lower().count("default")
        assert said <= 1 and not (said and p.show_default and p.default not in (None, False)), p.name


def test_deprecated_alias_warns_and_still_works(tmp_path):
    r = CliRunner().invoke(app, ["data", "synth", str(tmp_path / "d"), "--classes", "2", "--per-class", "2",
                                 "--size", "16", "--val-per-class", "1"])
    assert r.exit_code == 0, r.output
    assert "--classes is deprecated; use --num-classes" in r.output
    assert "--size is deprecated; use --image-size" in r.output
    assert sorted(p.name for p in (tmp_path / "d" / "train").iterdir()) and \
        len([p for p in (tmp_path / "d" / "train").iterdir() if p.is_dir()]) == 2


@pytest.mark.parametrize("argv", [["doctor"], ["rules"]])
def test_json_dash_is_stdout_and_only_json(argv):
    r = subprocess.run([sys.executable, "-m", "torchport", *argv, "--json", "-"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)   # nothing but JSON on stdout


def test_rules_docs_honours_json(tmp_path):
    r = CliRunner().invoke(app, ["rules", "--docs", str(tmp_path / "docs"), "--json", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "r.json").read_text())
    assert rows and {"code", "name"} <= set(rows[0]) and any((tmp_path / "docs").iterdir())


def test_check_list_shows_aliases():
    r = CliRunner().invoke(app, ["check", "--list"])
    assert r.exit_code == 0 and "(also: audit, device)" in r.output and "(also: data)" in r.output


@pytest.mark.parametrize("verb", ["bench", "profile"])
def test_require_accelerator_refuses_a_cpu_run(verb):
    r = CliRunner().invoke(app, [verb, "--preset", "tiny", "--device", "cpu", "--require-accelerator"])
    assert r.exit_code == 7, r.output   # ExitCode.NO_ACCELERATOR, one line, before any work
    assert r.output.count("\n") == 1 and f"torchport {verb}: error:" in r.output


def test_allow_cpu_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("TORCHPORT_REQUIRE_ACCELERATOR", "1")
    args = ["profile", "--preset", "tiny", "--model", "tinycnn", "--image-size", "16", "--batch-size", "2",
            "--steps", "1", "--warmup", "0", "--free-steps", "0", "--device", "cpu"]
    assert CliRunner().invoke(app, args).exit_code == 7
    r = CliRunner().invoke(app, [*args, "--allow-cpu"])
    assert r.exit_code == 0, r.output
