#!/usr/bin/env python3
"""Count the torch_npu custom-op names a code base calls (``torch_npu.npu_*``, ``torch.npu_*``, ``x.npu_*()``).

Reads a git repository without a work tree (the ``fetch`` mirror, or any clone) at a pinned commit, so
nothing of the scanned code is copied here. Prints ``count name receivers`` lines, most used first, or
JSON with ``--json``. With ``--wheel-ops FILE`` (one name a line, e.g. torch_npu's custom-op list) names
that are not torch_npu ops and were only seen as ``<something>.npu_x(...)`` are dropped (``args.npu_id``...).

usage: tools/npu_op_scan.py GIT_DIR [--commit 6a2804a3] [--under PyTorch/built-in] [--json FILE]

``--coverage`` prints the emulator's coverage table (docs/emulator.md, "torch_npu custom ops") for the scan:
it runs under the emulated NPU (TORCHPORT_EMULATE=npu is set for it) and reads torch_npu's op table.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys

# receiver '.' name, where the receiver is a dotted name (torch_npu / torch / torch.npu.utils / x / self.bn)
_PATTERN = r"([A-Za-z_][A-Za-z0-9_.]*)?\.(npu_[A-Za-z0-9_]+)(\s*\()?"
_ROOTS = ("torch_npu", "torch", "torch.npu", "torch.npu.utils", "torch_npu.npu", "torch_npu.npu.utils",
          "torch_npu.contrib", "torch_npu.contrib.function")
_NOT_OPS = ("args", "cfg", "config", "opt", "self.args", "self.config", "self.cfg", "parser")


def scan(git_dir: str, commit: str, under: str, wheel_ops: frozenset | None = None) -> dict:
    """``{name: {"count": n, "receivers": {receiver: n}}}`` over the ``.py`` files under ``under``."""
    cmd = ["git", "--git-dir", git_dir, "grep", "-h", "-o", "-E", "-I", _PATTERN, commit, "--",
           f"{under.rstrip('/')}/*.py" if under else "*.py"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"error: git grep failed in {git_dir}: {out.stderr.strip()}")
    found: dict = {}
    rx = re.compile(_PATTERN)
    for line in out.stdout.splitlines():
        m = rx.search(line.split(":", 1)[-1] if line.startswith(commit + ":") else line)
        if not m:
            continue
        receiver, name, called = m.group(1) or "", m.group(2), bool(m.group(3))
        if receiver in _NOT_OPS or receiver.endswith("_ids") or receiver.split(".")[-1] in _NOT_OPS:
            continue
        kind = receiver if receiver in _ROOTS else "<tensor method>"
        if kind == "<tensor method>":
            if not called or (wheel_ops is not None and name not in wheel_ops):
                continue
        entry = found.setdefault(name, {"count": 0, "receivers": collections.Counter()})
        entry["count"] += 1
        entry["receivers"][kind] += 1
    return {k: {"count": v["count"], "receivers": dict(v["receivers"])}
            for k, v in sorted(found.items(), key=lambda kv: (-kv[1]["count"], kv[0]))}


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--under", default="PyTorch/built-in")
    ap.add_argument("--wheel-ops", help="file of torch_npu op names, one a line")
    ap.add_argument("--json", help="write the scan as JSON (- for stdout)")
    ap.add_argument("--coverage", action="store_true", help="print the emulator's coverage table (markdown)")
    a = ap.parse_args(argv)
    commit = subprocess.run(["git", "--git-dir", a.git_dir, "rev-parse", a.commit], capture_output=True,
                            text=True).stdout.strip()
    if not commit:
        print(f"error: {a.commit!r} is not a commit of {a.git_dir}; pass --commit with one it has", file=sys.stderr)
        return 2
    ops = None
    if a.wheel_ops:
        ops = frozenset(ln.strip() for ln in open(a.wheel_ops) if ln.strip() and not ln.startswith("#"))
    result = scan(a.git_dir, commit, a.under, ops)
    doc = {"source": a.git_dir, "commit": commit, "under": a.under, "names": result}
    if a.coverage:
        import os

        os.environ.setdefault("TORCHPORT_EMULATE", "npu")
        import torch  # noqa: F401  (installs the emulator)
        import torch_npu

        print(torch_npu._ops.coverage_markdown(doc), end="")
        return 0
    if a.json:
        text = json.dumps(doc, indent=1)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as f:
                f.write(text + "\n")
    else:
        for name, e in result.items():
            print(f"{e['count']:5d} {name:45s} {', '.join(f'{k}:{n}' for k, n in e['receivers'].items())}")
        print(f"{len(result)} distinct names, commit {commit[:12]}, under {a.under}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
