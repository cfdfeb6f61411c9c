"""Precision and recall of ``torchport scan`` on pinned third-party repositories, against our own labels.

The labels (``tools/scan_labels.csv``) are ours: one row per finding of the scan (``true`` / ``false``, with the
reason in our own words) ``report-only`` for a line worth reporting that must not be rewritten, and one row per CUDA-only line a careful reader finds that the scan should report
(``expected``). No third-party code is stored here: the repositories are read at a pinned commit from local
bare mirrors (``owner+name/repo``, as the ``fetch`` tool leaves them) and extracted to a temporary folder.

* **precision** = findings labelled ``true`` (or ``report-only`` and reported without a fix: a guard that a
  rewrite would turn into a silent wrong result) / findings (an unlabelled finding counts as not true and is listed,
  so a rule change that adds findings cannot raise the figure by going unlabelled);
* **recall** = labelled lines (every row but ``false``) on which the scan reports
  something / labelled lines. A ``false`` row's line does not count towards recall.

A finding matches a label by (path, line, code) (a finding that matches an ``expected`` row is true); for recall an
``expected`` row's line is found by any finding on it.

Usage::

    .venv/bin/python tools/scan_labels.py --mirrors /work/.mirror                 # this tree's torchport
    .venv/bin/python tools/scan_labels.py --mirrors /work/.mirror --src /tmp/before/src   # another tree's
    .venv/bin/python tools/scan_labels.py --mirrors /work/.mirror --unlabelled    # rows to label, as CSV
    .venv/bin/python tools/scan_labels.py --mirrors /work/.mirror --candidates    # cuda/nccl lines no label covers
    .venv/bin/python tools/scan_labels.py --mirrors /work/.mirror --markdown out.md --json out.json

Exit status 0 when every repository meets the targets (``--target`` precision and recall, default 0.95) and no
finding is unlabelled, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = HERE / "scan_labels.csv"

#: repository -> (pinned commit, the folders / files of it that are scanned and labelled)
PINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "NVIDIA/Megatron-LM": ("d98e8a64ddf34856e74b24714e3bedb2f5a39553", ("megatron/core/optimizer",)),
    "facebookresearch/detectron2": ("02b5c4e295e990042a714712c21dc79b731e8833", ("detectron2",)),
    "huggingface/pytorch-image-models": ("aa4b5850c1543fa488abf260f18390eda46cf85d", ("timm",)),
}

#: what a careful reader greps for (``--candidates``): device names, collective backends, CUDA APIs
_CANDIDATE = re.compile(r"cuda|nccl|\bgpu\b|device\s*=\s*['\"]|\.type\(\)|is_available|HalfTensor|FloatTensor")
FIELDS = ("repo", "commit", "path", "line", "rule", "label", "reason")


@dataclass
class Tally:
    repo: str
    findings: int = 0
    true: int = 0
    false: int = 0
    unlabelled: list[dict] = field(default_factory=list)
    labelled_lines: int = 0
    found_lines: int = 0
    missed: list[tuple[str, int, str]] = field(default_factory=list)
    false_rows: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.true / self.findings if self.findings else 1.0

    @property
    def recall(self) -> float:
        return self.found_lines / self.labelled_lines if self.labelled_lines else 1.0


def read_labels(path: Path = LABELS) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f)]
    for r in rows:
        if r["label"] not in ("true", "false", "report-only", "expected"):
            raise SystemExit(f"error: {path}: label {r['label']!r} of {r['path']}:{r['line']} is not "
                             "true / false / report-only / expected; fix the row")
        r["line"] = int(r["line"])
    return rows


def extract(mirrors: Path, repo: str, commit: str, scope: tuple[str, ...], dest: Path) -> Path:
    """``git archive`` the scoped paths of ``repo`` at ``commit`` from its bare mirror into ``dest``."""
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    if not git_dir.exists():
        raise SystemExit(f"error: no mirror of {repo} at {git_dir}; fetch it (github:{repo}) or pass --mirrors")
    out = dest / repo.replace("/", "+")
    out.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", commit, *scope],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"error: {repo}@{commit[:12]}: {archive.stderr.decode().strip()}; fetch a newer mirror")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def scan(root: Path, scope: tuple[str, ...], src: Path | None) -> list[dict]:
    """The findings of ``torchport scan`` (default rules, no settings file, no cache) over ``scope``."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    proc = subprocess.run([sys.executable, "-m", "torchport", "scan", "--isolated", "--no-cache", "--exit-zero",
                           "--format", "json", *scope], cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: torchport scan failed in {root} (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)["findings"]


def tally(repo: str, findings: list[dict], labels: list[dict]) -> Tally:
    t = Tally(repo)
    mine = [r for r in labels if r["repo"] == repo]
    by_key = {(r["path"], r["line"], r["rule"]): r for r in mine}
    found_lines = {(f["file"], f["line"]) for f in findings}
    for f in findings:
        t.findings += 1
        row = by_key.get((f["file"], f["line"], f["code"]))
        if row is None:
            t.unlabelled.append(f)
        elif row["label"] in ("true", "expected") or (row["label"] == "report-only" and not f.get("fixable")):
            t.true += 1
        else:
            t.false += 1
            t.false_rows.append((f["file"], f["line"], f["code"]))
    lines = {(r["path"], r["line"]): r for r in mine if r["label"] != "false"}
    t.labelled_lines = len(lines)
    for (path, line), r in sorted(lines.items()):
        if (path, line) in found_lines:
            t.found_lines += 1
        else:
            t.missed.append((path, line, r["reason"]))
    return t


def candidates(root: Path, scope: tuple[str, ...], labels: list[dict], repo: str) -> list[tuple[str, int, str]]:
    """Lines a careful reader looks at (``_CANDIDATE``) that no label row covers."""
    covered = {(r["path"], r["line"]) for r in labels if r["repo"] == repo}
    out = []
    for part in scope:
        base = root / part
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        for p in files:
            rel = p.relative_to(root).as_posix()
            for i, text in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if _CANDIDATE.search(text) and (rel, i) not in covered:
                    out.append((rel, i, text.strip()[:120]))
    return out


def markdown(tallies: list[Tally]) -> str:
    rows = ["| repository (commit, scope) | findings | true | false | unlabelled | precision | labelled lines | "
            "found | recall |", "|---|---|---|---|---|---|---|---|---|"]
    for t in tallies:
        commit, scope = PINS[t.repo]
        rows.append(f"| {t.repo} ({commit[:10]}, `{' '.join(scope)}`) | {t.findings} | {t.true} | {t.false} | "
                    f"{len(t.unlabelled)} | {t.precision:.1%} | {t.labelled_lines} | {t.found_lines} | "
                    f"{t.recall:.1%} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="folder of owner+name/repo mirrors")
    ap.add_argument("--src", type=Path, help="a torchport src folder to measure instead of the installed one")
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--only", help="one repository (owner/name)")
    ap.add_argument("--unlabelled", action="store_true", help="print the unlabelled findings as CSV rows to label")
    ap.add_argument("--candidates", action="store_true", help="print cuda/nccl/device lines that no label covers")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    labels = read_labels(args.labels)
    tallies = []
    with tempfile.TemporaryDirectory(prefix="scan_labels_") as tmp:
        for repo, (commit, scope) in PINS.items():
            if args.only and repo != args.only:
                continue
            root = extract(args.mirrors, repo, commit, scope, Path(tmp))
            findings = scan(root, scope, args.src)
            t = tally(repo, findings, labels)
            tallies.append(t)
            if args.unlabelled:
                w = csv.writer(sys.stdout, lineterminator="\n")
                for f in t.unlabelled:
                    w.writerow([repo, commit, f["file"], f["line"], f["code"], "?", f["message"]])
            if args.candidates:
                for path, line, text in candidates(root, scope, labels, repo):
                    print(f"{repo} {path}:{line}: {text}")
    if not (args.unlabelled or args.candidates):
        print(markdown(tallies))
        for t in tallies:
            for path, line, code in t.false_rows:
                print(f"false   {t.repo} {path}:{line} {code}")
            for path, line, reason in t.missed:
                print(f"missed  {t.repo} {path}:{line} ({reason})")
            for f in t.unlabelled:
                print(f"unlabelled {t.repo} {f['file']}:{f['line']} {f['code']} {f['message']}")
    if args.markdown:
        args.markdown.write_text(markdown(tallies), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps([{"repo": t.repo, "commit": PINS[t.repo][0], "scope": PINS[t.repo][1],
                                          "findings": t.findings, "true": t.true, "false": t.false,
                                          "unlabelled": len(t.unlabelled), "precision": t.precision,
                                          "labelled_lines": t.labelled_lines, "found_lines": t.found_lines,
                                          "recall": t.recall, "missed": t.missed} for t in tallies], indent=2),
                             encoding="utf-8")
    ok = all(t.precision >= args.target and t.recall >= args.target and not t.unlabelled for t in tallies)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
