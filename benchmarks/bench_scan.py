"""Scan speed: ``torchport scan`` vs TorchFix on the installed torch + torchvision sources.

Both tools get the same file list in the same run, with the same number of worker
processes; speed is physical lines of all listed files per wall-clock second (files a
tool's prefilter skips still count: skipping them cheaply is part of the design).

Usage::

    # the baseline in a venv of its own: TorchFix pins libcst < 1.6, which would downgrade torchport's
    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install torchfix
    .venv/bin/python benchmarks/bench_scan.py --torchfix-python /tmp/tfvenv/bin/python
    .venv/bin/python benchmarks/bench_scan.py --torchfix-python /tmp/tfvenv/bin/python --limit 400   # a subset
    .venv/bin/python benchmarks/bench_scan.py --torchfix-python /tmp/tfvenv/bin/python --json bench.json

Prints lines/s for each tool and the ratio (target: torchport >= 5x TorchFix).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def source_files(limit: int | None) -> list[Path]:
    """torch + torchvision ``.py`` files (sorted); with ``limit``, every k-th file."""
    import importlib.util

    files: list[Path] = []
    for pkg in ("torch", "torchvision"):
        spec = importlib.util.find_spec(pkg)
        if spec is None or spec.origin is None:
            raise SystemExit(f"{pkg} is not installed: nothing to benchmark on")
        files += sorted(Path(spec.origin).parent.rglob("*.py"))
    if limit and limit < len(files):
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    return files


def count_lines(files: list[Path]) -> int:
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += fh.read().count(b"\n")
    return total


def _cpu() -> float:
    """CPU seconds used so far by this process and its reaped children (workers included)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_torchport(files: list[Path], jobs: int) -> dict:
    from torchport.migrate.runner import Options, run

    c0, t0 = _cpu(), time.perf_counter()
    report = run([str(f) for f in files], Options(jobs=jobs, respect_gitignore=False))
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    return {"seconds": seconds, "cpu_seconds": cpu, "findings": len(report.findings), "errors": len(report.errors),
            "analysed": report.analysed}


def run_torchfix(files: list[Path], jobs: int, list_file: Path, python: str | None = None) -> dict | None:
    """TorchFix's own command line, on the same files and worker count (None if not installed).

    ``python``: an interpreter that has torchfix (e.g. a separate venv, since TorchFix pins
    libcst < 1.6); default this one.
    """
    import importlib.util

    if python is None:
        if importlib.util.find_spec("torchfix") is None:
            return None
        python = sys.executable
    elif subprocess.run([python, "-c", "import torchfix"], capture_output=True).returncode != 0:
        raise SystemExit(f"--torchfix-python {python}: torchfix is not importable there (pip install torchfix)")
    list_file.write_text("\n".join(map(str, files)))
    # a tiny launcher: the file list is too long for a command line
    launcher = (
        "import sys; from pathlib import Path; from torchfix.__main__ import main; "
        f"sys.argv = ['torchfix', '--jobs', '{jobs}', *Path(r'{list_file}').read_text().split(chr(10))]; main()"
    )
    c0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run([python, "-c", launcher], capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"torchfix failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"seconds": seconds, "cpu_seconds": cpu, "diff_lines": proc.stdout.count("\n"),
            "stderr_tail": proc.stderr.strip()[-200:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="scan an evenly spread subset of N files")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes for both tools")
    parser.add_argument("--skip-torchfix", action="store_true", help="only time torchport")
    parser.add_argument("--torchfix-python", default=None,
                        help="python of a separate venv with torchfix (it pins libcst < 1.6), e.g. /tmp/tfvenv/bin/python")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args(argv)

    files = source_files(args.limit)
    lines = count_lines(files)
    print(f"corpus: {len(files)} files, {lines:,} lines (torch + torchvision), jobs={args.jobs}, "
          f"cpus={os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")

    ours = run_torchport(files, args.jobs)
    ours["lines_per_s"] = lines / ours["seconds"]
    ours["lines_per_cpu_s"] = lines / ours["cpu_seconds"]
    print(f"torchport scan : {ours['seconds']:8.1f} s  {ours['lines_per_s']:10,.0f} lines/s  "
          f"{ours['lines_per_cpu_s']:10,.0f} lines/CPU-s  "
          f"({ours['analysed']} files parsed after the text prefilter, {ours['findings']} findings, "
          f"{ours['errors']} unparsable)")
    result = {"files": len(files), "lines": lines, "jobs": args.jobs, "torchport": ours}
    if not args.skip_torchfix:
        theirs = run_torchfix(files, args.jobs, Path(tempfile.mkdtemp(prefix="bench_scan_")) / "files.txt",
                              args.torchfix_python)
        if theirs is None:
            print("torchfix       : not installed (pip install torchfix) -- no ratio")
        else:
            theirs["lines_per_s"] = lines / theirs["seconds"]
            theirs["lines_per_cpu_s"] = lines / theirs["cpu_seconds"]
            ratio = ours["lines_per_s"] / theirs["lines_per_s"]
            cpu_ratio = ours["lines_per_cpu_s"] / theirs["lines_per_cpu_s"]
            print(f"torchfix       : {theirs['seconds']:8.1f} s  {theirs['lines_per_s']:10,.0f} lines/s  "
                  f"{theirs['lines_per_cpu_s']:10,.0f} lines/CPU-s")
            print(f"ratio          : torchport is {ratio:.1f}x TorchFix's lines/s (wall clock; target >= 5x), "
                  f"{cpu_ratio:.1f}x per CPU-second (insensitive to other load on the machine)")
            result.update(torchfix=theirs, ratio=ratio, cpu_ratio=cpu_ratio)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
