"""``scan`` / ``fix`` convert their option values without pydantic (:mod:`torchport.cli._coerce`), to the same
values and the same errors as typer's own converters.

Each argument vector is parsed twice: by the command ``torchport`` runs (light converters) and by the same app
built without them (typer's pydantic adapters); the parameters, or the error message, must be equal.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from torchport.cli._options import normalise_help
from torchport.cli.main import build_app, command

OK = [
    ["scan"],
    ["scan", "src", "tests/x.py", "-j", "2", "--select", "TP1", "--select", "TP201", "--ignore", "TP9"],
    ["scan", ".", "--jobs", "007", "--format", "json", "-o", "sarif:out.sarif", "--json", "r.json", "-q"],
    ["scan", "-", "--stdin-filename", "a/b.py", "--config", "pyproject.toml", "--cache-dir", "c", "-vv"],
    ["scan", "--extension", "pyw:python", "--exclude", "build/", "--no-cache", "--exit-zero", "--statistics"],
    ["fix", "a.py", "--write", "--unsafe-fixes", "--emit", "torch", "-j", "1", "--show-fixes"],
    ["fix", "--diff", "--check", "--extend-select", "TP901", "--no-gitignore", "--isolated"],
    ["scan", "-j", " 3"],
]
ARGVS = OK + [
    # values the light converter hands to typer's own (signs, underscores, not numbers, empty paths): pydantic
    # takes "-1", "1_0" and "" (as Path(".")); "two" and "2.5" are errors with its message
    ["scan", "-j", "-1"],
    ["scan", "-j", "two"],
    ["scan", "-j", "1_0"],
    ["scan", "--config", ""],
    ["fix", "-j", "2.5"],
]


def _parse(cmd, argv: list[str]):
    try:
        ctx = cmd.commands[argv[0]].make_context(argv[0], list(argv[1:]))
        return {k: (type(v).__name__, v) for k, v in ctx.params.items()}
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        return ("error", type(exc).__name__, message)


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) for a in ARGVS])
def test_light_values_equal_typers_own(argv):
    light = command(["scan"])
    own = normalise_help(typer.main.get_command(build_app(["scan"])))
    got = _parse(light, argv)
    assert got == _parse(own, argv)
    if argv in OK:
        assert isinstance(got, dict), got     # these parse: their values are compared, not two equal errors


def test_a_bad_number_is_typers_error():
    got = _parse(command(["scan"]), ["scan", "-j", "two"])
    assert got[0] == "error" and "--jobs" in got[2] and "integer" in got[2], got


def test_the_light_converter_is_in_use():
    """The comparison above compares something: scan's options carry the light converter before parsing."""
    scan = command(["scan"]).commands["scan"]
    kinds = {p.name: type(getattr(p, "_runtime_param", None)).__name__ for p in scan.params}
    assert kinds["jobs"] == kinds["paths"] == kinds["select"] == "_Plain", kinds


def test_paths_are_paths(tmp_path: Path):
    got = _parse(command(["scan"]), ["scan", str(tmp_path), "--json", str(tmp_path / "r.json")])
    assert got["paths"] == ("list", [tmp_path]) and got["json_out"] == ("PosixPath", tmp_path / "r.json")
