"""Scan speed at repository scale: torchport (cold / warm cache, fast scan vs full pass, vs the code before)
against ruff and TorchFix, on the same files in one run.

Corpora (each a folder the tools walk):

* ``timm``: pytorch-image-models (``--timm DIR``, e.g. a checkout fetched at a pinned commit; default: the
  installed ``timm`` package copied to a temporary folder);
* ``tree2000``: a generated tree of 2,000 files -- timm's files cycled, each with its own header line (so
  no two share a content hash), 10 per folder;
* ``torch``: the installed torch sources (``--torch-limit`` files, evenly spread; default all).

Rows, run as real commands (a fresh process each, CPU = user + system of the process and its workers):

* ``torchport cold``: an empty cache folder; ``torchport warm``: the same command again;
* ``full pass``: ``TORCHPORT_SCAN_FULL_PASS=1 --no-cache`` (every file through LibCST: the reference);
* ``before``: the torchport of ``--before-src DIR`` (a ``src`` folder of an older commit, e.g.
  ``git archive f8cfb79 src | tar x -C /tmp/before``), ``--no-cache`` where it has no such flag;
* ``ruff`` cold (``--no-cache``) and warm (its cache), default rules; ``torchfix`` (``--torchfix-python``: it
  pins libcst < 1.6, so it lives in a venv of its own: ``python3 -m venv /tmp/tfvenv &&
  /tmp/tfvenv/bin/pip install torchfix``).

Rounds are interleaved (tool by tool, round by round); the median is printed with the ratio to torchport cold.

Usage::

    .venv/bin/python benchmarks/bench_scan.py --timm /tmp/timm --before-src /tmp/before/src \\
        --torchfix-python /tmp/tfvenv/bin/python --rounds 3 --json scan.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], *, env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the process and its children, exit code, stdout tail)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t0, _children_cpu() - c0, proc.returncode, (proc.stdout + proc.stderr)[-400:]


def _pkg_dir(name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{name} is not installed")
    return Path(spec.origin).parent


def corpus_timm(work: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    dst = work / "timm"
    shutil.copytree(_pkg_dir("timm"), dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def corpus_tree(work: Path, source: Path, n: int = 2000) -> Path:
    files = sorted(source.rglob("*.py"))
    dst = work / f"tree{n}"
    for i in range(n):
        src = files[i % len(files)]
        out = dst / f"pkg{i // 100:02d}" / f"mod{(i // 10) % 10}" / f"m{i:04d}_{src.name}"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"# generated file {i} (from {src.name})\n" + src.read_text(encoding="utf-8", errors="replace"))
    return dst


def corpus_torch(work: Path, limit: int | None) -> Path:
    files = sorted(p for p in _pkg_dir("torch").rglob("*.py"))
    if limit and limit < len(files):
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    dst = work / "torch"
    root = _pkg_dir("torch")
    for f in files:   # under dst/torch/: a folder of torch's own modules (types.py ...) as the cwd would shadow the stdlib
        out = dst / "torch" / f.relative_to(root)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, out)
    return dst


def rows(args, work: Path) -> dict[str, list[str]]:
    tp = [sys.executable, "-m", "torchport", "scan", ".", "--exit-zero", "-q", "--output-format", "concise",
          "--no-gitignore"]
    out = {
        "torchport cold": tp + ["--cache-dir", str(work / "tpcache")],
        "torchport warm": tp + ["--cache-dir", str(work / "tpcache")],
        "full pass": tp + ["--no-cache"],
    }
    if args.before_src:
        out["before"] = [sys.executable, "-m", "torchport", "scan", ".", "--exit-zero", "--output-format", "concise",
                         "--no-gitignore"]
        helptext = subprocess.run([*out["before"][:4], "--help"], capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": args.before_src}).stdout
        if "--no-cache" in helptext:   # an older torchport with a cache: cold, as the other rows
            out["before"].append("--no-cache")
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if Path(ruff).exists():
        out["ruff cold"] = [ruff, "check", ".", "--no-cache", "--exit-zero", "-q"]
        out["ruff warm"] = [ruff, "check", ".", "--exit-zero", "-q", "--cache-dir", str(work / "ruffcache")]
    if args.torchfix_python and work.name in args.torchfix_corpora.split(","):
        out["torchfix"] = [args.torchfix_python, "-m", "torchfix", "--jobs", str(os.cpu_count() or 1), "."]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timm", help="a pytorch-image-models checkout (default: the installed timm package)")
    ap.add_argument("--torch-limit", type=int, default=None, help="torch files, evenly spread (default all)")
    ap.add_argument("--corpora", default="timm,tree2000,torch")
    ap.add_argument("--before-src", help="the src folder of an older torchport (the 'before' row)")
    ap.add_argument("--torchfix-python", help="python of a venv with torchfix")
    ap.add_argument("--torchfix-corpora", default="timm,tree2000,torch",
                    help="the corpora TorchFix runs on (it is ~20x slower: on a busy machine, timm alone)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torchfix-rounds", type=int, default=None,
                    help="rounds TorchFix runs in (default: --rounds; it takes minutes per round on a busy machine)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench_scan_"))
    result: dict = {"load_before": os.getloadavg(), "cpus": os.cpu_count(), "corpora": {}}
    try:
        timm = corpus_timm(work, args.timm)
        made = {"timm": lambda: timm, "tree2000": lambda: corpus_tree(work, timm),
                "torch": lambda: corpus_torch(work, args.torch_limit)}
        for name in [c.strip() for c in args.corpora.split(",") if c.strip()]:
            folder = made[name]()
            files = list(folder.rglob("*.py"))
            lines = sum(p.read_bytes().count(b"\n") for p in files)
            cmds = rows(args, work / name)
            (work / name).mkdir(exist_ok=True)
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
            for r in range(args.rounds):
                for key, cmd in cmds.items():
                    if key == "torchfix" and args.torchfix_rounds is not None and r >= args.torchfix_rounds:
                        continue
                    if key == "torchport cold":
                        shutil.rmtree(work / name / "tpcache", ignore_errors=True)
                    if key == "ruff warm" and r == 0:
                        timed(cmd, cwd=folder)      # fill ruff's cache once
                    env = {"TORCHPORT_SCAN_FULL_PASS": "1"} if key == "full pass" else {}
                    if key == "before":
                        env["PYTHONPATH"] = args.before_src
                    wall, cpu, rc, tail = timed(cmd, env=env, cwd=folder)
                    if rc not in (0, 1):
                        print(f"  {key}: exit {rc}: {tail}", file=sys.stderr)
                    times[key].append((wall, cpu))
            med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
            base = med["torchport cold"]
            print(f"\n{name}: {len(files)} files, {lines:,} lines, load average {os.getloadavg()[0]:.1f}")
            print(f"  {'row':16} {'wall s':>8} {'CPU s':>8}   CPU vs torchport cold")
            for k, (w, c) in med.items():
                print(f"  {k:16} {w:8.2f} {c:8.2f}   {c / base[1]:6.2f}x")
            result["corpora"][name] = {"files": len(files), "lines": lines,
                                       "rows": {k: {"wall": w, "cpu": c} for k, (w, c) in med.items()}}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
