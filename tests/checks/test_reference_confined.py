"""A parity reference's ``files.init`` / ``files.trace`` are confined to the reference's folder (issue 36):
an absolute path, ``../`` or a symlink out is refused on purpose (exit 5, one line), never read."""

from __future__ import annotations

import json
import shutil

import pytest

from checks_targets import healthy
from torchport.checks import parity
from torchport.runtime.checkpoint import CheckpointRefusedError


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("rec")
    parity(healthy(), device=_cpu(), record=d / "ref.json", steps=2)
    return d


def _cpu():
    from torchport.runtime.device import select_device

    return select_device("cpu", warn=False)


def _copy(recorded, tmp_path):
    d = tmp_path / "refs"
    shutil.copytree(recorded, d)
    return d / "ref.json"


@pytest.mark.parametrize("kind", ["init", "trace"])
@pytest.mark.parametrize("form", ["dotdot", "absolute", "symlink-out"])
def test_sidecar_out_of_the_folder_is_refused(recorded, tmp_path, kind, form):
    ref = _copy(recorded, tmp_path)
    outside = tmp_path / f"outside.{kind}.pt"
    shutil.copy(ref.parent / f"ref.{kind}.pt", outside)
    doc = json.loads(ref.read_text())
    if form == "dotdot":
        doc["files"][kind] = f"../outside.{kind}.pt"
    elif form == "absolute":
        doc["files"][kind] = str(outside)
    else:
        (ref.parent / f"link.{kind}.pt").symlink_to(outside)
        doc["files"][kind] = f"link.{kind}.pt"
    ref.write_text(json.dumps(doc))
    with pytest.raises(CheckpointRefusedError) as exc:
        parity(healthy(), device=_cpu(), reference=ref)
    msg = str(exc.value)
    assert f"files.{kind}" in msg and "leads out of the reference's folder" in msg and "\n" not in msg


def test_cli_refusal_is_exit_5_one_line(recorded, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from torchport.cli.main import app

    ref = _copy(recorded, tmp_path)
    doc = json.loads(ref.read_text())
    doc["files"]["init"] = "/etc/hostname"
    ref.write_text(json.dumps(doc))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["check", "--only", "parity", "--device", "cpu", "--reference", str(ref)])
    assert res.exit_code == 5, res.output
    assert "Traceback" not in res.output and "crashed" not in res.output
    assert [ln for ln in res.output.splitlines() if "error:" in ln and "files.init" in ln], res.output


@pytest.mark.parametrize("kind", ["init", "trace"])
def test_a_planted_pickle_in_a_sidecar_is_a_refusal_exit_5_not_a_crash(recorded, tmp_path, monkeypatch, kind):
    """A hostile --reference (its own init / trace file replaced by a pickle that would run code): refused on
    purpose -- exit 5, one line naming the file -- never "the check crashed", and the code never runs."""
    import sys
    from pathlib import Path

    import torch
    from typer.testing import CliRunner

    from torchport.cli.main import app

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
    import _hostile

    ref = _copy(recorded, tmp_path)
    doc = json.loads(ref.read_text())
    marker = tmp_path / "ran"
    torch.save({"planted": _hostile.Planted(marker)}, ref.parent / doc["files"][kind])
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["check", "--only", "parity", "--device", "cpu", "--reference", str(ref)])
    assert res.exit_code == 5, res.output
    assert "Traceback" not in res.output and "crashed" not in res.output and not marker.exists(), res.output
    assert [ln for ln in res.output.splitlines() if "error:" in ln and "refused" in ln], res.output
