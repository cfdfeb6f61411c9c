#!/usr/bin/env python
"""Run torch_npu's own tests (Ascend/pytorch, pinned commit) against torchport's emulated NPU.

The test files are NOT part of this repository: they are extracted at run time from a checkout
or bare mirror of https://github.com/Ascend/pytorch with ``git archive`` at the pinned commit,
into a temporary directory that is removed afterwards. Each file runs in its own
``pytest`` process with ``TORCHPORT_EMULATE=npu:N`` and torchport's pytest plugin ON (as a user's
CI would run it); the results come from pytest's JUnit XML.

A file that does not import counts all its tests (``def test`` lines) as failed, so hiding tests
behind an import error never raises the pass rate. Every failure is listed with a reason: the
reasons we have classified live in ``tools/torch_npu_suite_reasons.json`` (test id -> reason,
``needs real silicon: ...`` / ``private torch_npu internals: ...`` / ...); anything else is
listed as ``unclassified: <first line of the error>``.

usage:
    git clone https://github.com/Ascend/pytorch /tmp/ascend-pytorch      # once (or a bare mirror)
    python tools/torch_npu_suite.py /tmp/ascend-pytorch [--commit SHA] [--out DIR] [--file PATH ...]

Writes ``DIR/torch_npu_suite.md`` (per-file table, total, failure table) and
``DIR/torch_npu_suite.json``; prints the markdown. Exit 0 when every selected file ran (whatever the
pass rate), 2 on bad arguments, 6 when the commit or a file cannot be read from the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from io import BytesIO
from pathlib import Path

#: Ascend/pytorch master on 2026-08-21 (the 2.13/2.14/2.15 line)
PINNED_COMMIT = "9e73e708ab9350d203475609f36f8a43f6a0c2ab"

#: the Python surface a training script uses (device, streams/events, memory, RNG, AMP,
#: serialization, tensors/copies, transfer_to_npu, profiler, optim, hccl, pin memory,
#: multi-device, torch.accelerator, DataParallel)
FILES = (
    "test/npu/test_device.py",
    "test/npu/test_stream.py",
    "test/npu/test_npu.py",
    "test/npu/test_torch_npu.py",
    "test/npu/test_amp.py",
    "test/npu/test_generators.py",
    "test/npu/test_serialization.py",
    "test/npu/test_copy.py",
    "test/npu/test_tensors.py",
    "test/npu/test_storage.py",
    "test/npu/test_per_process_memory_fraction.py",
    "test/npu/test_pin_memory_withoutsetdevice.py",
    "test/npu/test_multi_devices_single_process.py",
    "test/contrib/test_transfer_to_npu.py",
    "test/profiler/test_npu_profiler.py",
    "test/optim/test_fused_optimizers.py",
    "test/distributed/test_hccl_group.py",
    "test/distributed/test_data_parallel.py",
    "test/test_accelerator.py",
    "test/test_autocast.py",
    # widened (issue 37): the card's layout rules (torch_npu's copy-to-contiguous and format tests), tensors,
    # optimizers and schedulers, float status, contrib modules scripts use
    *(f"test/trans_contiguous/test_{n}.py" for n in (
        "as_strided_copy_to_contiguous", "combined_flatten_x__copy_to_contiguous",
        "combined_reshape_x_copy_to_contiguous", "combined_squeeze_x_copy_to_contiguous",
        "combined_unsqueeze_x_copy_to_contiguous", "combined_views_copy_to_contiguous",
        "single_broadcast_copy_to_contiguous", "single_permute_copy_to_contiguous",
        "single_reshape_copy_to_contiguous", "single_slice_copy_to_contiguous",
        "special_cases_copy_to_contiguous", "tensorto_preserve_format", "tri_combined_views_copy_to_contiguous")),
    "test/npu/test_tensor.py",
    "test/npu/test_empty_strided_npu.py",
    "test/npu/test_optimizer_zero_grad.py",
    "test/npu/test_combine_tensors.py",
    "test/npu/test_check_over_flow.py",
    "test/optim/test_lrscheduler.py",
    "test/contrib/test_crossentropy.py",
    "test/contrib/test_drop_path.py",
    "test/contrib/test_roll.py",
)

REASONS_FILE = Path(__file__).with_name("torch_npu_suite_reasons.json")
EXIT_USAGE, EXIT_IO = 2, 6
#: pytest with torch imported first: the emulator installs through torch's autoload, and then the
#: plugin's start-up does not race it (issue 21 item 4 is about that race; this harness measures the
#: torch_npu API surface, with the plugin ON all the same)
_PYTEST = "import sys, torch, pytest; sys.exit(pytest.main(sys.argv[1:]))"


@dataclass
class FileResult:
    path: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    imported: bool = True
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # [test id, first error line]

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped


def _git(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if proc.returncode != 0:
        raise OSError(proc.stderr.decode(errors="replace").strip().splitlines()[-1] if proc.stderr else "git failed")
    return proc.stdout


def extract(repo: Path, commit: str, dest: Path) -> None:
    """``git archive`` the ``test/`` tree at ``commit`` into ``dest`` (helpers the files import included)."""
    data = _git(repo, "archive", "--format=tar", commit, "test")
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def _first_line(text: str) -> str:
    """The exception line of a failure: the last ``E   SomeError: ...`` line, else the last line."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.match(r"^(?:E\s+)?((?:[\w.]+(?:Error|Exception|Exit|Interrupt)|assert|AssertionError)\b.*)", ln)
        if m:
            return m.group(1)[:200]
    return (lines[-1] if lines else "")[:200]


def _count_defs(path: Path) -> int:
    return len(re.findall(r"^\s*def test", path.read_text(errors="replace"), flags=re.M))


def run_file(root: Path, rel: str, devices: int, timeout: int, python: str, test_timeout: int = 600) -> FileResult:
    res = FileResult(rel)
    xml = root / (rel.replace("/", "__") + ".xml")
    env = dict(os.environ, TORCHPORT_EMULATE=f"npu:{devices}", PYTHONDONTWRITEBYTECODE="1",
               PYTORCH_PRINT_REPRO_ON_FAILURE="0")
    test_file = root / rel
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [python, "-c", _PYTEST, "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={xml}",
             f"--timeout={test_timeout}", test_file.name],
            cwd=test_file.parent, env=env, capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = f"TimeoutExpired: the file ran past {timeout} s\n{exc.stdout or ''}"
    res.seconds = round(time.monotonic() - started, 1)
    cases = []
    if xml.is_file():
        cases = list(ET.parse(xml).getroot().iter("testcase"))
    collect_error = not cases or all(
        c.get("name") in (None, "", test_file.stem) and c.find("error") is not None for c in cases)
    if collect_error:
        res.imported = False
        n = max(_count_defs(test_file), 1)
        res.failed = n
        msg = _first_line(out) or "collection failed"
        res.failures.append([f"{rel} (does not import; {n} tests)", msg])
        return res
    for case in cases:
        tid = f"{rel}::{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        bad = case.find("failure")
        err = case.find("error")
        if case.find("skipped") is not None:
            res.skipped += 1
        elif bad is not None:
            res.failed += 1
            res.failures.append([tid, _first_line((bad.text or "") + "\n" + (bad.get("message") or ""))])
        elif err is not None:
            res.errors += 1
            res.failures.append([tid, _first_line((err.text or "") + "\n" + (err.get("message") or ""))])
        else:
            res.passed += 1
    return res


def _reason(tid: str, msg: str, reasons: dict) -> str:
    for key, why in reasons.items():
        if tid == key or tid.startswith(key):
            return why
    return f"unclassified: {msg}"


def render(results: list[FileResult], commit: str, reasons: dict) -> str:
    tot = FileResult("total")
    for r in results:
        for k in ("passed", "failed", "errors", "skipped"):
            setattr(tot, k, getattr(tot, k) + getattr(r, k))
    rate = 100.0 * tot.passed / tot.total if tot.total else 0.0
    out = [f"torch_npu tests (Ascend/pytorch@{commit[:10]}) on the emulated NPU, plugin ON", "",
           "| file | passed | failed | errors | skipped | total | s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        name = r.path + ("" if r.imported else " (does not import)")
        out.append(f"| {name} | {r.passed} | {r.failed} | {r.errors} | {r.skipped} | {r.total} | {r.seconds} |")
    out.append(f"| **total** | **{tot.passed}** | **{tot.failed}** | **{tot.errors}** | **{tot.skipped}** "
               f"| **{tot.total}** | |")
    out += ["", f"pass rate: {tot.passed}/{tot.total} = {rate:.1f}%", "", "| failing test | reason |", "|---|---|"]
    for r in results:
        for tid, msg in r.failures:
            out.append(f"| {tid} | {_reason(tid, msg, reasons).replace('|', '/')} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="checkout or bare mirror of github.com/Ascend/pytorch")
    ap.add_argument("--commit", default=PINNED_COMMIT, help=f"commit to test (default: pinned {PINNED_COMMIT[:10]})")
    ap.add_argument("--file", action="append", dest="files", help="a test file (repeatable; default: the 20 files)")
    ap.add_argument("--out", type=Path, default=Path("torch_npu_suite_out"), help="directory for the .md and .json")
    ap.add_argument("--devices", type=int, default=2, help="emulated device count (default 2)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per file (default 1800)")
    ap.add_argument("--test-timeout", type=int, default=600,
                    help="seconds per test (default 600: one test starts 17 interpreters)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torchport installed")
    ap.add_argument("--rerender", action="store_true",
                    help="only re-render --out's torch_npu_suite.json with the current reasons file")
    args = ap.parse_args(argv)
    reasons = json.loads(REASONS_FILE.read_text()) if REASONS_FILE.is_file() else {}
    if args.rerender:
        data = json.loads((args.out / "torch_npu_suite.json").read_text())
        results = [FileResult(**{k: v for k, v in f.items() if k != "total"}) for f in data["files"]]
        return _write(args.out, results, data["commit"], reasons)
    if not args.repo.exists():
        print(f"torch_npu_suite: {args.repo} does not exist; clone https://github.com/Ascend/pytorch there "
              "(or pass a bare mirror)", file=sys.stderr)
        return EXIT_USAGE
    files = args.files or list(FILES)
    with tempfile.TemporaryDirectory(prefix="torch_npu_suite.") as tmp:
        root = Path(tmp)
        try:
            extract(args.repo, args.commit, root)
        except OSError as exc:
            print(f"torch_npu_suite: cannot read test/ at {args.commit} from {args.repo}: {exc}; "
                  "fetch the commit (git fetch origin) or pass --commit", file=sys.stderr)
            return EXIT_IO
        missing = [f for f in files if not (root / f).is_file()]
        if missing:
            print(f"torch_npu_suite: {missing[0]} is not in {args.repo} at {args.commit}; pick files from "
                  "its test/ tree", file=sys.stderr)
            return EXIT_IO
        results = []
        for rel in files:
            print(f"torch_npu_suite: {rel} ...", file=sys.stderr, flush=True)
            results.append(run_file(root, rel, args.devices, args.timeout, args.python, args.test_timeout))
    return _write(args.out, results, args.commit, reasons)


def _write(out: Path, results: list, commit: str, reasons: dict) -> int:
    md = render(results, commit, reasons)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("torch_npu_suite.md", md),
                       ("torch_npu_suite.json", json.dumps({"commit": commit, "files": [
                           dict(asdict(r), total=r.total) for r in results]}, indent=1))):
        tmp_path = out / (name + ".tmp")
        tmp_path.write_text(text)
        os.replace(tmp_path, out / name)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
