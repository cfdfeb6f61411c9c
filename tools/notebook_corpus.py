"""Notebooks, scanned and fixed like .py files: the same findings? Real notebooks from public repositories.

For each notebook (taken from a fetched checkout at a pinned commit, copied to a temporary folder, never
committed):

1. ``torchport scan nb.ipynb`` (cell-relative positions);
2. the same code as a .py file, made independently of torchport's notebook reader: the code cells joined in
   order, IPython lines (``%``/``!`` magics, ``x = !cmd``) commented out, ``%%`` cells other than
   ``%%time``/``%%timeit``/``%%capture`` left out -- then ``torchport scan nb.py``;
3. compare the findings as (rule code, the source line's text) multisets (a file that could not be analysed --
   not valid Python -- makes the row fail: no findings is not the same findings);
4. ``torchport fix --write --unsafe-fixes`` on the notebook: still valid JSON, the same cells and outputs,
   only ``source`` fields changed, a second scan finds no fixable finding.

Usage::

    python tools/notebook_corpus.py REPO_DIR:NOTEBOOK [REPO_DIR:NOTEBOOK ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: IPython lines: magics, shell escapes, help syntax (``obj?``, ``?obj``, ``obj[0]??``, wildcard ``torch.*Tensor?``)
MAGIC = re.compile(r"^[ \t]*(?:[%!]|[\w.]+[ \t]*=[ \t]*[%!])"
                   r"|^[ \t]*(?:\?{0,2}%{0,2}[\w*]+(?:\.[\w*]+|\[-?\d+\])*\?{1,2}|\?{1,2}[\w*.]+)[ \t]*$")


def as_python(nb: dict) -> tuple[str, list[tuple[int, int]]]:
    """The code cells as one .py text, and for each of its lines the (cell, line) it came from."""
    out, where = [], []
    for ci, cell in enumerate(nb["cells"], 1):
        if cell.get("cell_type") != "code":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        first = src.split("\n", 1)[0].strip()
        if first.startswith("%%") and first.split()[0] not in ("%%time", "%%timeit", "%%capture"):
            continue
        for li, line in enumerate(src.split("\n"), 1):
            out.append("# " + line if MAGIC.match(line) else line)
            where.append((ci, li))
        out.append("")
        where.append((ci, 0))
    return "\n".join(out) + "\n", where


def scan(path: Path, errors: list[str] | None = None) -> list[dict]:
    """The findings of ``torchport scan path``; the file errors (not analysed: not valid Python ...) go to ``errors``."""
    res = subprocess.run([sys.executable, "-m", "torchport", "scan", str(path), "--format", "json", "--no-cache",
                          "--isolated"], capture_output=True, text=True)
    report = json.loads(res.stdout)
    if errors is not None:
        errors.extend(f"{path.suffix}: {e['message']}" for e in report["errors"])
    return report["findings"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="+", help="REPO_DIR:PATH_IN_REPO (the repo's HEAD commit is used)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="nbcorpus-"))
    rows = []
    try:
        for i, spec in enumerate(args.notebooks):
            repo, rel = spec.split(":", 1)
            commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip()
            text = subprocess.run(["git", "-C", repo, "show", f"HEAD:{rel}"], capture_output=True).stdout
            nb_path = work / f"nb{i}.ipynb"
            nb_path.write_bytes(text)
            nb = json.loads(text)
            py, where = as_python(nb)
            py_path = work / f"nb{i}.py"
            py_path.write_text(py, encoding="utf-8")
            errors: list[str] = []  # a file not analysed has no findings: never "the same findings"
            in_nb = scan(nb_path, errors)
            in_py = scan(py_path, errors)
            lines_py = py.split("\n")
            cells = {ci: ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]).split("\n")
                     for ci, c in enumerate(nb["cells"], 1)}
            a = collections.Counter((f["code"], cells[f["cell"]][f["line"] - 1].strip()) for f in in_nb)
            b = collections.Counter((f["code"], lines_py[f["line"] - 1].strip()) for f in in_py)
            fixed = work / f"fixed{i}.ipynb"
            shutil.copyfile(nb_path, fixed)
            subprocess.run([sys.executable, "-m", "torchport", "fix", str(fixed), "--write", "--unsafe-fixes",
                            "--no-cache", "--isolated"], capture_output=True, text=True)
            after = json.loads(fixed.read_text(encoding="utf-8"))
            same_shape = (len(after["cells"]) == len(nb["cells"]) and all(
                {k: v for k, v in x.items() if k != "source"} == {k: v for k, v in y.items() if k != "source"}
                for x, y in zip(nb["cells"], after["cells"])))
            left = [f for f in scan(fixed) if f["fixable"]]
            changed = sum(x["source"] != y["source"] for x, y in zip(nb["cells"], after["cells"]))
            row = {"repo": Path(repo).parent.name.replace("+", "/"), "commit": commit, "notebook": rel,
                   "code_cells": sum(c.get("cell_type") == "code" for c in nb["cells"]),
                   "findings_ipynb": len(in_nb), "findings_py": len(in_py), "same": a == b and not errors, "errors": errors,
                   "cells_rewritten": changed, "outputs_metadata_kept": same_shape, "fixable_left": len(left),
                   "only_in_ipynb": sorted((a - b).elements()), "only_in_py": sorted((b - a).elements())}
            rows.append(row)
            print(f"{row['repo']}@{commit} {rel}: {row['code_cells']} code cells, findings ipynb {len(in_nb)} / "
                  f"py {len(in_py)} same={row['same']}{' errors: ' + '; '.join(errors) if errors else ''}; fix: {changed} cells rewritten, outputs kept={same_shape}, "
                  f"fixable left {len(left)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["same"] and r["outputs_metadata_kept"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
