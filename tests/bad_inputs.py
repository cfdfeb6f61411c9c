"""Record what a bad input does (exit code + the message the user sees) as a row of the generated
``docs/bad-inputs.md`` table, and check it against the committed row.

Usage in a test::

    res = CliRunner().invoke(app, ["train", "--device", "tpu"])
    bad_input("unknown-device", "an unknown device name", "torchport train --device tpu",
              res.exit_code, res.stderr, expect_code=ExitCode.USAGE, tmp=tmp_path)

The test asserts the exit code it expects, that the message is one line without a traceback, and
that the row equals the committed one in ``tests/golden/bad_inputs.json``; ``pytest --update-golden``
writes the row instead (then run ``tools/render_bad_inputs.py``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROWS = Path(__file__).resolve().parent / "golden" / "bad_inputs.json"


def _message(output: str, tmp_dirs, contains: str | None) -> str:
    """The line a user reads: the ``error:`` line, else the first line with ``contains``, else the last."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"(^|: )error: ", ln)]
    named = [ln for ln in lines if contains and contains in ln]
    msg = errors[0] if errors else named[0] if named else (lines[-1] if lines else "")
    for d in tmp_dirs:
        for form in {str(d), os.path.realpath(d)}:
            msg = msg.replace(form, "<tmp>")
    msg = re.sub(r"/tmp/pytest-of-[^/\s'\"]+/pytest-\d+/[^/\s'\"]+", "<tmp>", msg)
    msg = re.sub(r"/tmp/tmp[\w-]+", "<tmp>", msg)
    return msg


def bad_input(row_id: str, what: str, command: str, exit_code: int, output: str, *, expect_code: int,
              tmp=(), contains: str | None = None) -> dict:
    """Check one bad input's outcome and compare it with (or, updating, write) its documented row."""
    assert "Traceback" not in output, f"{command}: traceback instead of one line:\n{output[-3000:]}"
    assert exit_code == int(expect_code), f"{command}: exit {exit_code}, expected {int(expect_code)}:\n{output[-3000:]}"
    tmp_dirs = [tmp] if isinstance(tmp, (str, os.PathLike)) else list(tmp)
    row = {"id": row_id, "input": what, "command": command, "exit_code": int(exit_code),
           "message": _message(output, tmp_dirs, contains)}
    assert row["message"], f"{command}: no message at all"
    if contains is not None:
        assert contains in row["message"], f"{command}: {contains!r} not in {row['message']!r}"
    rows = json.loads(ROWS.read_text(encoding="utf-8")) if ROWS.exists() else []
    by_id = {r["id"]: r for r in rows}
    if os.environ.get("TORCHPORT_UPDATE_GOLDEN"):
        by_id[row_id] = row
        ROWS.parent.mkdir(parents=True, exist_ok=True)
        ROWS.write_text(json.dumps(sorted(by_id.values(), key=lambda r: r["id"]), indent=1) + "\n", encoding="utf-8")
        return row
    assert row_id in by_id, f"no documented row {row_id!r}: run pytest --update-golden, then tools/render_bad_inputs.py"
    assert by_id[row_id] == row, (f"bad input {row_id!r} behaves differently from docs/bad-inputs.md:\n"
                                  f"  documented: {by_id[row_id]}\n  observed:   {row}\n"
                                  "(pytest --update-golden rewrites the row; then run tools/render_bad_inputs.py)")
    return row


def probe_helpers():
    """``tools/probes.py`` as a module: the probe battery's ways of damaging data, reused by the tests."""
    import importlib.util
    import sys

    if "torchport_probes" not in sys.modules:
        spec = importlib.util.spec_from_file_location("torchport_probes", Path(__file__).resolve().parents[1] / "tools" / "probes.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["torchport_probes"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["torchport_probes"]
