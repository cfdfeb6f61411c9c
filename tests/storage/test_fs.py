"""The one filesystem layer (:mod:`torchport.storage.fs`): the same operations, the same answers, on disk
and in an object store -- and nothing else in the package asks "is this a URL?"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchport.storage import fs

SRC = Path(__file__).resolve().parents[2] / "src" / "torchport"
#: where the local-or-URL question may be asked: the edge (paths.py), the layer, and the store it wraps
EDGE = {"paths.py", "storage/fs.py", "storage/store.py", "storage/__init__.py"}


def _exercise(base):
    d = fs.join(base, "ck")
    assert fs.listdir(d) == [] and not fs.exists(fs.join(d, "a.json"))
    assert fs.read_bytes(fs.join(d, "a.json"), missing_ok=True) is None
    fs.write_atomic(fs.join(d, "a.json"), b"{}")
    fs.write_atomic(fs.join(d, "b.bin"), b"xyz")
    fs.write_atomic(fs.join(d, "b.bin"), b"abcd")            # replaced whole
    assert fs.read_bytes(fs.join(d, "b.bin")) == b"abcd"
    assert fs.exists(fs.join(d, "a.json")) and not fs.exists(d)  # a directory / prefix is not a file
    assert fs.listdir(d) == ["a.json", "b.bin"] == fs.files(d)
    assert fs.digest(fs.join(d, "b.bin")) == ("88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589", 4)
    assert fs.name(fs.join(d, "b.bin")) == "b.bin" and fs.name(fs.parent(fs.join(d, "b.bin"))) == "ck"
    fs.remove(fs.join(d, "a.json"))
    fs.remove(fs.join(d, "a.json"))                          # already gone: no error
    assert fs.listdir(d) == ["b.bin"]
    fs.remove_tree(d)
    assert fs.listdir(d) == []


def test_local_operations(tmp_path):
    _exercise(tmp_path)
    assert isinstance(fs.join(tmp_path, "x"), Path) and fs.location(str(tmp_path)) == tmp_path
    assert fs.key(tmp_path / "a" / ".." / "b") == str((tmp_path / "b").resolve())


def test_store_operations_answer_the_same(store_env):
    _exercise(store_env)
    assert fs.join(store_env, "x", "y") == f"{store_env}/x/y" and fs.location(store_env + "/") == store_env
    assert fs.remote(store_env) and not fs.remote(Path("s3:")) and not fs.remote("runs/a")


def test_missing_file_raises_unless_missing_ok(tmp_path):
    with pytest.raises(FileNotFoundError):
        fs.read_bytes(tmp_path / "nope")


def test_no_local_or_url_question_outside_the_layer():
    """``is_url(`` is called only at the edge and in the layer (it was 34 calls in 13 files); runtime/dcp.py
    has no private local-or-URL helpers left."""
    offenders = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel in EDGE:
            continue
        n = len(re.findall(r"\bis_url\(", path.read_text(encoding="utf-8")))
        if n:
            offenders[rel] = n
    assert offenders == {}, f"ask torchport.storage.fs, not is_url(), in {offenders}"
    dcp = (SRC / "runtime" / "dcp.py").read_text(encoding="utf-8")
    for helper in ("_read_bytes", "_write_bytes_atomic", "_list", "_files", "_remove_tree", "_digest", "_join"):
        assert f"def {helper}(" not in dcp, helper
