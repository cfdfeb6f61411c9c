"""Run tests/fixtures/cuda_surface_calls.py (one JSON line per CUDA call) under ``torchport run`` on the CPU and on
the emulated npu, and after ``torchport fix --unsafe-fixes`` on both; print a markdown table, one row per call.

    .venv/bin/python tools/shim_surface_calls.py                    # the four columns
    .venv/bin/python tools/shim_surface_calls.py --before f8cfb79   # + the same two runs with that commit's src/

``--before REV`` exports ``src/`` of REV with ``git archive`` into a temporary folder and puts it first on
PYTHONPATH (the checkout's editable install is a plain path entry, so the old code wins).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "cuda_surface_calls.py"
CLEAR = ("TORCHPORT_DEVICE", "TORCHPORT_EMULATE", "TORCHPORT_REQUIRE_ACCELERATOR", "TORCHPORT_RUN_CHILD",
         "TORCHPORT_SHIM_REPORT")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEAR}
    env["PYTHONWARNINGS"] = "ignore"
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str]) -> dict[str, dict]:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out: dict[str, dict] = {}
    for line in proc.stdout.splitlines():
        if line.startswith('{"call"'):
            d = json.loads(line)
            out[d["call"]] = d
    if not out:
        out["(no output)"] = {"ok": False, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    return out


def _cell(d: dict | None) -> str:
    if d is None:
        return "-"
    if d["ok"]:
        value = json.dumps(d.get("value"))
        return "ok " + (value if len(value) <= 28 else value[:25] + "...")
    error = d["error"]
    if error.startswith("RefusedCall"):
        return "refused"
    kind, _, msg = error.partition(": ")
    return f"**{kind}** {msg[:48]}".replace("|", "\\|")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", help="also run with src/ of this commit")
    args = parser.parse_args()
    py = sys.executable
    columns: dict[str, dict[str, dict]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="shim-surface-"))
    try:
        if args.before:
            old = tmp / "old"
            old.mkdir()
            archive = subprocess.run(["git", "archive", args.before, "src"], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            old_env = {"PYTHONPATH": str(old / "src")}
            columns[f"run cpu ({args.before})"] = _run([py, "-m", "torchport", "run", "--format", "none", "--device",
                                                         "cpu", str(FIXTURE)], _env(**old_env))
            columns[f"run npu ({args.before})"] = _run([py, "-m", "torchport", "run", "--format", "none",
                                                         str(FIXTURE)], _env(TORCHPORT_EMULATE="npu", **old_env))
        columns["run cpu"] = _run([py, "-m", "torchport", "run", "--format", "none", "--device", "cpu", str(FIXTURE)],
                                  _env())
        columns["run npu"] = _run([py, "-m", "torchport", "run", "--format", "none", str(FIXTURE)],
                                  _env(TORCHPORT_EMULATE="npu"))
        fixed = tmp / "cuda_surface_calls_fixed.py"
        shutil.copy(FIXTURE, fixed)
        proc = subprocess.run([py, "-m", "torchport", "fix", "--unsafe-fixes", "--write", "--format", "concise",
                               str(fixed)], cwd=ROOT, env=_env(), capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"torchport fix failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        columns["fix cpu"] = _run([py, str(fixed)], _env(TORCHPORT_DEVICE="cpu"))
        columns["fix npu"] = _run([py, str(fixed)], _env(TORCHPORT_EMULATE="npu"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    names = list(dict.fromkeys(n for col in columns.values() for n in col))
    print("| call | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name in names:
        print(f"| `{name}` | " + " | ".join(_cell(col.get(name)) for col in columns.values()) + " |")
    ok = [sum(1 for d in col.values() if d["ok"]) for col in columns.values()]
    refused = [sum(1 for d in col.values() if not d["ok"] and d["error"].startswith("RefusedCall"))
               for col in columns.values()]
    print("| **ok / refused / failed** | " + " | ".join(
        f"{o} / {r} / {len(col) - o - r}" for o, r, col in zip(ok, refused, columns.values())) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
