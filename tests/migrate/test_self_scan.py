"""Self-application: torchport's own code passes its own scanner (DESIGN principle 4).

Only ``backends/`` (the one place that names devices), the emulator, the shim and the
migration rule data may name a device type; everything else reaches devices through
the backend registry, so ``torchport scan`` must find nothing there.
"""

from __future__ import annotations

from typer.testing import CliRunner

from migrate_helpers import REPO
from torchport.cli.main import app
from torchport.migrate import scan_paths

EXEMPT = ("backends", "emulate", "shim", "migrate")
EXCLUDE = [f"src/torchport/{d}" for d in EXEMPT]


def test_scanner_finds_nothing_in_torchport(monkeypatch):
    monkeypatch.chdir(REPO)
    report = scan_paths(["src/torchport"], exclude=EXCLUDE, jobs=1)
    assert report.files > 20, "the scan saw too few files: is the exclude list too broad?"
    assert not any(f"/{d}/" in r.path for d in EXEMPT for r in report.results)
    assert report.errors == []
    found = [f"{f.location} {f.code} {f.message}" for f in report.findings]
    assert not found, "device-specific code outside backends/emulate/shim/migrate:\n" + "\n".join(found)


def test_scan_command_exits_zero_on_torchport(monkeypatch):
    monkeypatch.chdir(REPO)
    args = ["scan", "src/torchport", "--jobs", "1"] + [a for d in EXCLUDE for a in ("--exclude", d)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
