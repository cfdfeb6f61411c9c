"""Audit: every call in the package that can unpickle (``torch.load``, ``pickle``, ``np.load``, ``yaml.load``, DCP's
storage readers) is on a short list with its reason; a new one fails here until it is justified (docs/security.md)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "torchport"

#: (file under src/torchport, what, keyword condition) -> (count, why it is safe)
ALLOWED = {
    ("runtime/checkpoint.py", "torch.load", "weights_only=True"): (1, "safe_torch_load: the one loader of torch files"),
    ("runtime/checkpoint.py", "torch.load", "weights_only=False"): (
        1, "safe_torch_load(trust=True): --trust-checkpoint, off by default"),
    ("checks/checkpoint.py", "torch.load", "weights_only=True"): (2, "check inspects the file it saved itself"),
    ("data/format.py", "np.load", "allow_pickle=False"): (2, "the shard index: a structured array, no pickle"),
    ("runtime/safe_load.py", "pickle.Unpickler", "subclass"): (1, "RestrictedUnpickler: allow-listed globals only"),
    ("runtime/safe_load.py", "FileSystemReader", "subclass"): (1, "SafeFileSystemReader"),
    ("runtime/safe_load.py", "FsspecReader", "subclass"): (1, "SafeFsspecReader"),
}

RISKY = {"torch.load", "pickle.load", "pickle.loads", "pickle.Unpickler", "np.load", "numpy.load", "yaml.load",
         "yaml.unsafe_load", "yaml.full_load", "marshal.load", "marshal.loads", "FileSystemReader", "FsspecReader",
         "dill.load", "cloudpickle.load", "joblib.load", "shelve.open"}


def _name(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    name = ".".join(reversed(parts))
    return name.removeprefix("dcp.").removeprefix("torch.distributed.checkpoint.")


def _kw(call: ast.Call) -> str:
    for k in call.keywords:
        if k.arg in ("weights_only", "allow_pickle") and isinstance(k.value, ast.Constant):
            return f"{k.arg}={k.value.value}"
    return "call"


def audit() -> Counter:
    found: Counter = Counter()
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("migrate/rules/"):
            continue                      # rule data: names of calls to find in users' code, never called
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) in RISKY:
                found[(rel, _name(node.func), _kw(node))] += 1
            elif isinstance(node, ast.Call) and _name(node.func) == "type" and len(node.args) == 3:
                for base in getattr(node.args[1], "elts", []):
                    if _name(base) in RISKY:
                        found[(rel, _name(base), "subclass")] += 1
            elif isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if _name(base) in RISKY:
                        found[(rel, _name(base), "subclass")] += 1
    return found


def test_every_unpickling_call_in_the_package_is_on_the_justified_list():
    found = audit()
    unknown = {k: n for k, n in found.items() if k not in ALLOWED}
    assert not unknown, f"unjustified unpickling calls (add a reason to ALLOWED or make them safe): {unknown}"
    changed = {k: (n, ALLOWED[k][0]) for k, n in found.items() if n != ALLOWED[k][0]}
    assert not changed, f"more/fewer calls than justified: {changed}"
    assert set(found) == set(ALLOWED), f"stale entries: {set(ALLOWED) - set(found)}"


def test_the_audit_sees_a_planted_unsafe_call(tmp_path, monkeypatch):
    import sys

    mod = sys.modules[__name__]
    (tmp_path / "evil.py").write_text("import torch, pickle, yaml\ntorch.load(f)\npickle.loads(b)\nyaml.load(s)\n"
                                      "class R(pickle.Unpickler):\n    pass\n")
    monkeypatch.setattr(mod, "SRC", tmp_path)
    assert set(audit()) == {("evil.py", "torch.load", "call"), ("evil.py", "pickle.loads", "call"),
                            ("evil.py", "yaml.load", "call"), ("evil.py", "pickle.Unpickler", "subclass")}


def test_dcp_loads_go_through_the_safe_reader():
    """DCP's own readers unpickle .metadata with plain pickle and items with weights_only=False: ours override both."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

    from torchport.runtime import safe_load

    for cls, base in ((safe_load._local_reader_class(), FileSystemReader),
                      (safe_load._remote_reader_class(), FsspecReader)):
        for method in ("read_metadata", "read_data", "set_up_storage_reader"):
            assert getattr(cls, method) is getattr(safe_load._SafeReaderMixin, method) is not getattr(base, method)
    assert "storage_reader=_reader(" in (SRC / "runtime" / "dcp.py").read_text()
