"""Equivalence harness for migration: does `torchport fix` output behave like the original under `torchport run`?

For each corpus script, four modes run in fresh interpreters on the same seed:

* ``run cpu``  -- the original under ``torchport run --device cpu``
* ``run npu``  -- the original under ``torchport run`` with the emulated npu (``TORCHPORT_EMULATE=npu``)
* ``fix cpu``  -- ``torchport fix --write`` applied to a copy, run with ``TORCHPORT_DEVICE=cpu`` (and no visible
  CUDA devices, so ``--emit torch`` output, which reads no torchport setting, is on the CPU too)
* ``fix npu``  -- the fixed copy on the emulated npu

A probe (``tools/equivalence_probe/sitecustomize.py``) records per optimizer step the back-propagated losses,
the forward dtypes (autocast), the parameters' devices, whether the step changed the weights and a digest of the
host random generators, and stops the script after ``--steps`` steps; it also records every object passed to
``torch.save`` (keys, dtypes, shapes, devices, values, the devices after loading it back). The harness records
the files each mode wrote under its working folder (and removes them before the next mode). A row is
**equivalent** when, on each device, ``run`` and ``fix`` give the same number of ranks and, per rank, the same
devices and forward dtypes, weights that changed, the same random-generator states and the same losses --
bitwise without low precision, within ``--amp-rtol`` when a forward ran in float16/bfloat16 -- **and the same
saved state**: the same ``torch.save`` calls with the same objects, and the same files written (text files
compared with their digits masked: timings differ between any two runs).

Corpora:

* ``own`` (default): the small scripts under ``tests/migrate/equivalence/`` that re-create each third-party
  pattern (CI runs these; it has no network).
* ``pinned``: third-party scripts, fetched at the pinned commit from a local mirror (``--mirrors``: bare git
  repositories ``owner+name/repo``, as the session's fetch tool leaves them) -- never committed here. Each entry of ``PINNED`` is a recipe:
  repository, commit, path, arguments, and text patches that make it tiny-runnable on generated data.

Usage::

    python tools/migrate_corpus.py                         # own corpus, table on stdout
    python tools/migrate_corpus.py --markdown docs/migrate-corpus.md --json corpus.json
    python tools/migrate_corpus.py --corpus pinned --mirrors /work/.mirror
    python tools/migrate_corpus.py --emit torch            # the fix modes use `torchport fix --emit torch`

Exit code: 0 when every row is equivalent in every mode that ran on both sides, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tools" / "equivalence_probe"
OWN = ROOT / "tests" / "migrate" / "equivalence"
MODES = ("run cpu", "run npu", "fix cpu", "fix npu")
NPU_DEVICES = 2
_LOW = {"float16", "bfloat16"}
_CLEAR = ("TORCHPORT_DEVICE", "TORCHPORT_EMULATE", "TORCHPORT_REQUIRE_ACCELERATOR", "RANK", "WORLD_SIZE",
          "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHPORT_EQUIV_OUT")


@dataclasses.dataclass
class Script:
    """One corpus entry: a script file (already on disk) and the arguments that make it tiny."""

    name: str
    path: Path
    args: list[str] = dataclasses.field(default_factory=list)
    source: str = "own"
    maintainer_lines: int | None = None  # lines the maintainers changed in their own hand-port, where one exists
    root: Path | None = None  # the script's folder (its local modules) when it is more than one file


@dataclasses.dataclass
class ModeResult:
    """What one mode produced: exit status, the probe's records per rank, the tail of stderr, the
    ``torch.save`` records per rank and the files written (relative path -> digest)."""

    rc: int
    ranks: dict[int, list[dict]]
    error: str = ""
    saves: dict[int, list[dict]] = dataclasses.field(default_factory=dict)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    #: ``file:line`` (relative to the script's folder) of the innermost traceback frame in the script's own files
    failed_at: str | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0 and bool(self.ranks) and all(self.ranks.values())


@dataclasses.dataclass
class Row:
    """One script: the four modes and the equivalence verdict per device."""

    script: Script
    modes: dict[str, ModeResult]
    equivalent: dict[str, str]  # device -> "yes" or the first divergence (losses and saved state)
    fixed_imports_torchport: bool = False
    lines_changed: int = 0
    #: device -> the verdict of the training records alone (what the harness compared before saved state)
    training_only: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the findings ``torchport scan`` still reports in the fixed copy: ``file:line`` -> codes (reported only)
    left: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def crashes_at_finding(self) -> dict[str, str]:
        """device -> ``file:line CODES`` where the original runs under ``run`` and the fixed copy fails at a line
        that still carries a reported-only finding (the defect class issue 30 removes; 0 expected)."""
        out = {}
        for dev in ("cpu", "npu"):
            run, fix = self.modes.get(f"run {dev}"), self.modes.get(f"fix {dev}")
            if run is not None and fix is not None and run.ok and not fix.ok and fix.failed_at in self.left:
                out[dev] = f"{fix.failed_at} {','.join(self.left[fix.failed_at])}"
        return out

    def fails_where_run_works(self) -> dict[str, str]:
        """device -> ``file:line error`` where the original runs under ``run`` and the fixed copy fails (anywhere:
        a finding left at one line -- a CUDA default kept, say -- can fail at another)."""
        out = {}
        for dev in ("cpu", "npu"):
            run, fix = self.modes.get(f"run {dev}"), self.modes.get(f"fix {dev}")
            if run is not None and fix is not None and run.ok and not fix.ok:
                out[dev] = f"{fix.failed_at or '?'} {fix.error[:80]}".strip()
        return out

    @property
    def passed(self) -> bool:
        return all(v == "yes" for v in self.equivalent.values())


def _env(out: Path, steps: int, device: str, seed: int, fake_data: bool = False,
         fake_size: int = 64) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    env.update(TORCHPORT_EQUIV_OUT=str(out), TORCHPORT_EQUIV_STEPS=str(steps), TORCHPORT_EQUIV_SEED=str(seed),
               PYTHONPATH=os.pathsep.join([str(PROBE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PYTHONHASHSEED="0")
    if fake_data:
        env["TORCHPORT_EQUIV_FAKE_DATA"] = "1"
        env["TORCHPORT_EQUIV_FAKE_SIZE"] = str(fake_size)
    if device == "npu":
        env["TORCHPORT_EMULATE"] = f"npu:{NPU_DEVICES}"  # two cards: a spawn/DDP script runs two ranks
    else:
        env["TORCHPORT_DEVICE"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""  # torch-only fixed code picks its device from torch.accelerator
    return env


def _read(out: Path, pattern: str = "*[0-9].jsonl") -> dict[int, list[dict]]:
    ranks: dict[int, list[dict]] = {}
    for f in sorted(out.glob(pattern)):
        records = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        if records:
            ranks.setdefault(records[-1]["rank"], []).extend(records)
    return ranks


#: folders of the working directory that are the harness's own (the two copies and the probes' output)
_OWN_DIRS = ("orig", "fixed")


def _snapshot(work: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``work`` but the probes' folders: relative path -> (size, mtime_ns)."""
    out = {}
    for path in work.rglob("*"):
        rel = path.relative_to(work)
        if rel.parts[0].startswith("probe-") or "__pycache__" in rel.parts or not path.is_file():
            continue
        st = path.stat()
        out[str(rel)] = (st.st_size, st.st_mtime_ns)
    return out


def _digest(path: Path, work: Path | None = None) -> str:
    """A file's content digest; text files with their digits masked (timings, dates and pids differ between
    any two runs of one script) and the mode's own folder (``work/orig``, ``work/fixed``) written ``<script>``
    (minGPT's args.txt and Barlow Twins' stats.txt record ``sys.argv``, the script's path), others byte for byte."""
    import hashlib
    import re

    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + hashlib.sha1(data).hexdigest()[:16]
    if work is not None:
        for sub in _OWN_DIRS:
            text = text.replace(str(work / sub), "<script>")
    return "text:" + hashlib.sha1(re.sub(r"[0-9]+", "#", text).encode()).hexdigest()[:16]


def _masked_files(files: dict[str, str]) -> list[tuple[str, str]]:
    """The files written as (name with its digits masked, digest) pairs: timm writes into
    ``output/train/<date>-<time>-<model>/``, a new name in every run."""
    import re

    return sorted((re.sub(r"[0-9]+", "#", name), digest) for name, digest in files.items())


def _written(work: Path, before: dict[str, tuple[int, int]]) -> dict[str, str]:
    """The files a mode created or changed under ``work`` (``orig/`` and ``fixed/`` both shown as ``<script>/``),
    with their digests; files it created are removed so the next mode starts from the same folder (a checkpoint
    the run mode wrote must not be resumed by the fix mode). Files torch.save wrote are compared through their
    saved objects, not their bytes (a zip archive's record names carry the pid)."""
    written = {}
    for rel, stat in sorted(_snapshot(work).items()):
        if before.get(rel) == stat:
            continue
        first, _, rest = rel.partition(os.sep)
        name = f"<script>{os.sep}{rest}" if first in _OWN_DIRS and rest else rel
        path = work / rel
        written[name] = "torch.save" if _is_torch_save(path) else _digest(path, work)
        if rel not in before:
            path.unlink()
    for path in sorted(work.rglob("*"), reverse=True):  # folders the mode created, now empty
        rel = path.relative_to(work)
        if path.is_dir() and not rel.parts[0].startswith("probe-") and not any(path.iterdir()) \
                and not any(k.startswith(str(rel) + os.sep) for k in before):
            path.rmdir()
    return written


def _is_torch_save(path: Path) -> bool:
    """True for a torch.save archive (a zip holding ``<name>/data.pkl``)."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def run_mode(script: Script, mode: str, work: Path, steps: int, seed: int, timeout: float,
             fake_size: int = 64) -> ModeResult:
    """Run one mode of ``script`` in a fresh interpreter; ``work`` holds the original and ``fixed/``."""
    kind, device = mode.split()
    out = work / f"probe-{kind}-{device}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = _env(out, steps, device, seed, fake_data=script.source != "own", fake_size=fake_size)
    before = _snapshot(work)
    if kind == "run":
        cmd = [sys.executable, "-m", "torchport", "run", *(["--device", "cpu"] if device == "cpu" else []),
               str(work / "orig" / script.path.name), *script.args]
    else:
        cmd = [sys.executable, str(work / "fixed" / script.path.name), *script.args]
    try:
        # from the script's own folder, as its users run it (results/ and data/ beside it, files it writes there)
        proc = subprocess.run(cmd, cwd=work / ("orig" if kind == "run" else "fixed"), env=env, capture_output=True,
                              text=True, timeout=timeout)
        rc, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        rc, err = 124, f"timed out after {timeout:.0f} s"
    last = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith(" ")]
    errors = [ln for ln in last if "Error" in ln.split(":", 1)[0] or "Exception" in ln.split(":", 1)[0]]
    error = (errors or last or [""])[-1][:200] if rc != 0 else ""
    return ModeResult(rc=rc, ranks=_read(out), error=error, saves=_read(out, "*.saves.jsonl"),
                      files=_written(work, before), failed_at=_failed_at(err, work / kind_dir(kind)) if rc else None)


def kind_dir(kind: str) -> str:
    return "orig" if kind == "run" else "fixed"


def _failed_at(stderr: str, folder: Path) -> str | None:
    """``file:line`` of the innermost traceback frame in a file under ``folder`` (the script's own code)."""
    import re

    hit = None
    for m in re.finditer(r'File "([^"]+)", line (\d+)', stderr):
        path = Path(m.group(1))
        try:
            hit = f"{path.resolve().relative_to(folder.resolve())}:{m.group(2)}"
        except ValueError:
            continue
    return hit


def left_findings(fixed: Path) -> dict[str, list[str]]:
    """What ``torchport scan`` (default rules) still reports in the fixed copy: ``file:line`` -> codes."""
    proc = subprocess.run([sys.executable, "-m", "torchport", "scan", "--isolated", "--output-format", "json",
                           str(fixed)], cwd=fixed, capture_output=True, text=True, timeout=300)
    try:
        data = json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        return {}
    out: dict[str, list[str]] = {}
    for f in data.get("findings", []):
        path = Path(f["file"])
        rel = path.resolve().relative_to(fixed.resolve()) if path.is_absolute() else path
        out.setdefault(f"{rel}:{f['line']}", []).append(f["code"])
    return out


def fix_copy(script: Script, work: Path, unsafe: bool, emit: str = "torchport") -> tuple[bool, int]:
    """Copy ``script`` to ``work/orig`` and ``work/fixed``; run ``torchport fix --write --emit EMIT`` on the latter.

    Returns (the fixed file imports torchport, lines changed)."""
    for sub in ("orig", "fixed"):
        if script.root is not None:  # the script with its local modules; the whole folder is fixed
            shutil.copytree(script.root, work / sub, dirs_exist_ok=True)
        else:
            (work / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy2(script.path, work / sub / script.path.name)
    target = work / "fixed" / script.path.name
    cmd = [sys.executable, "-m", "torchport", "fix", "--write", "--isolated", "--emit", emit,
           *(["--unsafe-fixes"] if unsafe else []),
           str(work / "fixed" if script.root is not None else target)]
    subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=300)
    before = script.path.read_text(encoding="utf-8").splitlines()
    after = target.read_text(encoding="utf-8").splitlines()
    import difflib

    changed = sum(1 for ln in difflib.unified_diff(before, after, lineterm="", n=0)
                  if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---")))
    fixed_text = "\n".join(after)
    return ("import torchport" in fixed_text or "from torchport" in fixed_text), changed


def _close(a: float, b: float, rtol: float) -> bool:
    if rtol == 0:
        return a == b or (math.isnan(a) and math.isnan(b))
    return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol)


def compare(run: ModeResult, fix: ModeResult, amp_rtol: float) -> str:
    """'yes', or the first divergence between the original under run and the fixed script."""
    if not run.ok or not fix.ok:
        return "not compared (" + ", ".join(n for n, r in (("run", run), ("fix", fix)) if not r.ok) + " failed)"
    if sorted(run.ranks) != sorted(fix.ranks):
        return f"ranks differ: run {sorted(run.ranks)} vs fix {sorted(fix.ranks)}"
    trained = False
    for rank in sorted(run.ranks):
        a, b = run.ranks[rank], fix.ranks[rank]
        if len(a) != len(b):
            return f"rank {rank}: {len(a)} vs {len(b)} steps"
        for ra, rb in zip(a, b):
            step = ra["step"]
            if ra["devices"] != rb["devices"]:
                return f"rank {rank} step {step}: parameters on {ra['devices']} vs {rb['devices']}"
            if ra["dtypes"] != rb["dtypes"]:
                return f"rank {rank} step {step}: forward dtypes {ra['dtypes']} vs {rb['dtypes']}"
            if ra["changed"] != rb["changed"]:
                return f"rank {rank} step {step}: weights changed run={ra['changed']} fix={rb['changed']}"
            trained = trained or bool(ra["changed"])
            rtol = amp_rtol if _LOW & set(ra["dtypes"]) else 0.0
            if len(ra["losses"]) != len(rb["losses"]) or not all(
                    _close(x, y, rtol) for x, y in zip(ra["losses"], rb["losses"])):
                return f"rank {rank} step {step}: losses {ra['losses']} vs {rb['losses']}"
            if "rng" in ra and "rng" in rb and ra["rng"] != rb["rng"]:
                return f"rank {rank} step {step}: host random generators differ after the step"
    # a step may leave the weights alone in both (a warm-up whose first learning rate is 0, weiaicunzai's
    # CIFAR-100), but a run where no step of any rank changed them trained nothing (issue 22's mp.spawn job)
    return "yes" if trained else "no step changed the weights (run and fix alike): nothing trained"


def _low_precision(m: ModeResult) -> bool:
    return any(_LOW & set(rec["dtypes"]) for recs in m.ranks.values() for rec in recs)


def _same_object(a, b, rtol: float, where: str) -> str | None:
    """None when two saved-object summaries agree (tensor values bitwise, or within ``rtol`` of their sums
    when a forward ran in low precision), else where they first differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "tensor" in a and "tensor" in b:
            for key in ("tensor", "shape", "device"):
                if a[key] != b[key]:
                    return f"{where}: tensor {key} {a[key]} vs {b[key]}"
            if a["sha"] != b["sha"] and (rtol == 0 or isinstance(a["sum"], str) or isinstance(b["sum"], str)
                                         or not _close(a["sum"], b["sum"], rtol)):
                return f"{where}: tensor values differ (sum {a['sum']} vs {b['sum']})"
            return None
        if a.keys() != b.keys():
            return f"{where}: {_kind(a)} vs {_kind(b)}"
        if "keys" in a and a["keys"] != b["keys"]:
            missing, extra = [k for k in a["keys"] if k not in b["keys"]], [k for k in b["keys"] if k not in a["keys"]]
            return (f"{where}: keys differ (run only: {missing[:3]}, fix only: {extra[:3]})" if missing or extra
                    else f"{where}: key order differs")
        for key in a:
            if key == "values":
                for k, va, vb in zip(a["keys"], a["values"], b["values"]):
                    why = _same_object(va, vb, rtol, f"{where}[{k!r}]")
                    if why:
                        return why
                continue
            why = _same_object(a[key], b[key], rtol, where if key in ("state_dict", "attrs") else f"{where}.{key}")
            if why:
                return why
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} vs {len(b)} items"
        for i, (va, vb) in enumerate(zip(a, b)):
            why = _same_object(va, vb, rtol, f"{where}[{i}]")
            if why:
                return why
        return None
    if isinstance(a, float) and isinstance(b, float) and _close(a, b, rtol):
        return None
    return None if a == b else f"{where}: {a!r} vs {b!r}"


def _kind(summary: dict) -> str:
    for key in ("module", "object", "dict"):
        if key in summary:
            return f"{key} {summary[key]}"
    return "/".join(sorted(summary))


def compare_state(run: ModeResult, fix: ModeResult, amp_rtol: float) -> str:
    """'yes', or the first difference between what the two modes saved (torch.save calls and their objects,
    the devices of the loaded tensors, files written)."""
    rtol = amp_rtol if _low_precision(run) or _low_precision(fix) else 0.0
    if sorted(run.saves) != sorted(fix.saves):
        return f"torch.save on ranks {sorted(run.saves)} vs {sorted(fix.saves)}"
    for rank in sorted(run.saves):
        a, b = run.saves[rank], fix.saves[rank]
        if len(a) != len(b):
            return f"rank {rank}: {len(a)} vs {len(b)} torch.save calls"
        for i, (sa, sb) in enumerate(zip(a, b)):
            where = f"rank {rank} torch.save #{i + 1} ({sa['file']})"
            if sa["file"] != sb["file"]:
                return f"{where}: file {sa['file']} vs {sb['file']}"
            why = _same_object(sa["object"], sb["object"], rtol, where)
            if why:
                return why
            if sa.get("loaded_devices") != sb.get("loaded_devices"):
                return f"{where}: after loading, tensors on {sa.get('loaded_devices')} vs {sb.get('loaded_devices')}"
    a, b = _masked_files(run.files), _masked_files(fix.files)
    if [n for n, _ in a] != [n for n, _ in b]:
        only_run, only_fix = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        return f"files written differ (run only: {[n for n, _ in only_run][:3]}, fix only: {[n for n, _ in only_fix][:3]})"
    for (name, da), (_, db) in zip(a, b):
        if da != db:
            return f"file {name}: content differs"
    return "yes"


def verdict(run: ModeResult, fix: ModeResult, amp_rtol: float) -> tuple[str, str]:
    """(the whole verdict, the verdict of the training records alone)."""
    training = compare(run, fix, amp_rtol)
    if training != "yes":
        return training, training
    return compare_state(run, fix, amp_rtol), training


def check(script: Script, *, steps: int = 3, seed: int = 0, devices: tuple[str, ...] = ("cpu", "npu"),
          unsafe: bool = False, amp_rtol: float = 5e-3, timeout: float = 300, keep: Path | None = None,
          emit: str = "torchport", fake_size: int = 64) -> Row:
    """Run the modes of ``script`` on ``devices`` and compare run with fix on each (``emit``: what fix writes)."""
    work = Path(tempfile.mkdtemp(prefix=f"equiv-{script.name}-", dir=keep))
    try:
        imports, changed = fix_copy(script, work, unsafe, emit)
        modes = {f"{kind} {dev}": run_mode(script, f"{kind} {dev}", work, steps, seed, timeout, fake_size)
                 for dev in devices for kind in ("run", "fix")}
        verdicts = {dev: verdict(modes[f"run {dev}"], modes[f"fix {dev}"], amp_rtol) for dev in devices}
        return Row(script, modes, {d: v[0] for d, v in verdicts.items()}, imports, changed,
                   {d: v[1] for d, v in verdicts.items()}, left_findings(work / "fixed"))
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def own_corpus() -> list[Script]:
    """The scripts under tests/migrate/equivalence/ (arguments from their ``# corpus-args:`` line)."""
    scripts = []
    for path in sorted(OWN.glob("*.py")):
        args: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines()[:10]:
            if line.startswith("# corpus-args:"):
                args = line.split(":", 1)[1].split()
        scripts.append(Script(path.stem, path, args))
    return scripts


#: Third-party recipes: (name, repository, commit, path, arguments, [(old, new) text patches of the script, or
#: (file, old, new) of another file beside it]). Fetched from a
#: local mirror at the pinned commit by ``pinned_corpus``; never committed. torchvision datasets are replaced
#: by generated ones (the probe's TORCHPORT_EQUIV_FAKE_DATA), so most recipes need only small arguments.
_GAN = ("eriklindernoren/PyTorch-GAN", "36d3c77e5ff20ebe0aeefd322326a134a279b93e")
_GAN_SMALL = ["--batch_size", "8", "--n_cpu", "0"]
PINNED: list[tuple[str, str, str, str, list[str], list[tuple[str, ...]]]] = [
    *((f"gan-{n}", *_GAN, f"implementations/{n}/{f}.py", _GAN_SMALL, []) for n, f in (
        ("gan", "gan"), ("dcgan", "dcgan"), ("wgan", "wgan"), ("wgan_gp", "wgan_gp"), ("lsgan", "lsgan"),
        ("acgan", "acgan"), ("cgan", "cgan"), ("infogan", "infogan"), ("bgan", "bgan"), ("began", "began"),
        ("ebgan", "ebgan"), ("softmax_gan", "softmax_gan"), ("relativistic_gan", "relativistic_gan"),
        ("aae", "aae"), ("sgan", "sgan"), ("dragan", "dragan"), ("wgan_div", "wgan_div"))),
    # clustergan's discriminator loss back-propagates through the generator after `optimizer_GE.step()` changed
    # it in place, which torch >= 1.5 rejects in every mode; the patch re-runs D on the detached images (D has
    # not stepped yet: same D gradients, none wasted on G)
    ("gan-cluster_gan", *_GAN, "implementations/cluster_gan/clustergan.py", ["-b", "8", "-n", "1"],
     [("        optimizer_D.zero_grad()\n",
       "        optimizer_D.zero_grad()\n        D_gen = discriminator(gen_imgs.detach())\n")]),
]
#: pytorch/examples at the parent of the commit where the maintainers moved each script to torch.accelerator
#: by hand (the 7th field): the harness reports their lines changed next to ours.
_EX = "pytorch/examples"
MAINTAINER_PORTS: list[tuple[str, str, str, str, list[str], list[tuple[str, str]], str]] = [
    ("examples-mnist", _EX, "65722fe3ce14447420cf922fdd713bfe900b410f^", "mnist/main.py",
     ["--epochs", "1", "--batch-size", "8", "--test-batch-size", "8"], [], "65722fe3ce14447420cf922fdd713bfe900b410f"),
    ("examples-mnist_rnn", _EX, "65722fe3ce14447420cf922fdd713bfe900b410f^", "mnist_rnn/main.py",
     ["--cuda", "--epochs", "1", "--batch-size", "8", "--test-batch-size", "8"], [],
     "65722fe3ce14447420cf922fdd713bfe900b410f"),
    ("examples-mnist_forward_forward", _EX, "65722fe3ce14447420cf922fdd713bfe900b410f^",
     "mnist_forward_forward/main.py", ["--epochs", "1", "--train_size", "64", "--test_size", "64"], [],
     "65722fe3ce14447420cf922fdd713bfe900b410f"),
    ("examples-vae", _EX, "54e132ece5558f2b54f3f57f323bcdd71525436d^", "vae/main.py",
     ["--epochs", "1", "--batch-size", "8"], [], "54e132ece5558f2b54f3f57f323bcdd71525436d"),
    ("examples-siamese", _EX, "12dc18e872419aba06daa1c0f7e7b05df43644c7^", "siamese_network/main.py",
     ["--epochs", "1", "--batch-size", "8", "--test-batch-size", "8"], [], "12dc18e872419aba06daa1c0f7e7b05df43644c7"),
    ("examples-dcgan", _EX, "cc8e404cbcbf3a3c326789260deed89ee04b3408^", "dcgan/main.py",
     ["--cuda", "--dataset", "fake", "--batchSize", "4", "--imageSize", "64", "--niter", "1", "--workers", "0"], [],
     "cc8e404cbcbf3a3c326789260deed89ee04b3408"),
]
PINNED = PINNED + [r[:6] for r in MAINTAINER_PORTS]
#: the same MNIST script saving its model (`torch.save(model.state_dict(), "mnist_cnn.pt")` after the epochs): with
#: a small --fake-size and enough --steps the saved-state comparison has an object to compare
PINNED += [("examples-mnist-save", _EX, "65722fe3ce14447420cf922fdd713bfe900b410f^", "mnist/main.py",
            ["--epochs", "1", "--batch-size", "8", "--test-batch-size", "8", "--save-model"], [])]
#: self-supervised DDP with mp.spawn (one process per device, set_device(gpu), SyncBatchNorm)
_SIMSIAM = ("facebookresearch/simsiam", "a7bc1772896d0dad0806c51f0bb6f3b16d290468")
_SPAWN = ["--dist-url", "tcp://127.0.0.1:29517", "--multiprocessing-distributed", "--world-size", "1", "--rank", "0",
          "-b", "8", "--workers", "0", "--epochs", "1", "--seed", "0"]
PINNED += [
    ("simsiam-pretrain", *_SIMSIAM, "main_simsiam.py", ["-a", "resnet18", "--dim", "64", "--pred-dim", "16",
                                                         *_SPAWN, "data"], []),
    ("simsiam-lincls", *_SIMSIAM, "main_lincls.py", ["-a", "resnet18", *_SPAWN, "data"], []),
]
# --- corpus part A: vision & self-supervised
#: MoCo v1/v2 (mp.spawn DDP, shuffle-BN with all_gather/broadcast, a queue of negatives), at the MIT relicense
#: the accuracy helper's ``correct[:k].view(-1)`` fails on a non-contiguous slice with current torch, on CUDA too
#: (the script's own bug; pytorch/examples fixed it as ``reshape``)
_VIEW = ("correct[:k].view(-1)", "correct[:k].reshape(-1)")
_MOCO = ("facebookresearch/moco", "7397dfe146c7ca6bbb58e9c382498069178ba764")
PINNED += [
    ("moco-pretrain", *_MOCO, "main_moco.py", ["-a", "resnet18", "--moco-dim", "16", "--moco-k", "64", "--mlp",
                                               "--aug-plus", "--cos", *_SPAWN, "data"], [_VIEW]),
    ("moco-lincls", *_MOCO, "main_lincls.py", ["-a", "resnet18", *_SPAWN, "data"], [_VIEW]),
]
#: a classic CIFAR-10 trainer: ``device = 'cuda' if torch.cuda.is_available() else 'cpu'``, DataParallel on cuda
_CIFAR = ("kuangliu/pytorch-cifar", "49b7aa97b0c12fe0d4054e670403a16b6b834ddd")
PINNED += [
    ("cifar-main", *_CIFAR, "main.py", ["--lr", "0.1"], [
        # utils.progress_bar reads the terminal width with `stty size` at import: no terminal here
        ("from utils import progress_bar", "progress_bar = print"),
        ("batch_size=128, shuffle=True, num_workers=2", "batch_size=8, shuffle=True, num_workers=0")]),
]
#: a second GAN collection: one main.py, one trainer class per file (``.cuda()`` under ``if self.gpu_mode``)
_COLL = ("znxlwm/pytorch-generative-model-collections", "0d183bb5ea2fbe069e1c6806c4a9a1fd8e81656f")
#: (cifar10: its 3-channel Normalize on 1-channel MNIST fails with current torchvision, on CUDA too)
PINNED += [(f"collections-{t}", *_COLL, "main.py", ["--gan_type", t, "--dataset", "cifar10", "--input_size", "32",
                                                     "--epoch", "1", "--batch_size", "8"], [])
           for t in ("GAN", "CGAN", "infoGAN", "WGAN_GP", "BEGAN")]
#: Barlow Twins: mp.spawn over device_count(), SyncBatchNorm, LARS, torch.cuda.amp autocast + GradScaler
_BARLOW = ("facebookresearch/barlowtwins", "8e8d284ca0bc02f88b92328e53f9b901e86b4a3c")
PINNED += [
    ("barlowtwins-main", *_BARLOW, "main.py", ["--workers", "0", "--epochs", "1", "--batch-size", "4",
                                               "--projector", "64-64-64", "data"], [
        # resnet18 instead of the hard-coded resnet50: two ranks of resnet50 exceed a mode's 300 s on 2 cores
        ("models.resnet50(zero_init_residual=True)", "models.resnet18(zero_init_residual=True)"),
        ("sizes = [2048]", "sizes = [512]")]),
]
#: DINO: self-distillation with a ViT, fp16 GradScaler; init_distributed_mode takes the one-GPU path when
#: torch.cuda.is_available() (and exits "Does not support training without GPU" otherwise)
_DINO = ("facebookresearch/dino", "7c446df5b9f45747937fb0d72314eb9f7b66930a")
PINNED += [
    ("dino-main", *_DINO, "main_dino.py", ["--arch", "vit_tiny", "--out_dim", "256", "--batch_size_per_gpu", "2",
                                           "--epochs", "1", "--warmup_epochs", "0", "--local_crops_number", "0",
                                           "--num_workers", "0", "--data_path", "data", "--output_dir", "out",
                                           "--use_fp16", "true"], [
        # the --arch choices list XCiT models from torch.hub (network) when the parser is built
        ('+ torchvision_archs + torch.hub.list("facebookresearch/xcit:main"),', "+ torchvision_archs,")]),
]
#: Pytorch-UNet: segmentation with --amp and the ``!= 'mps'`` autocast guard; images and masks generated by a patch
#: (8 random 64x64 images with {0, 1} masks) and wandb replaced by a mock (it needs an account and network)
_UNET = ("milesial/Pytorch-UNet", "21d7850f2af30a9695bbeea75f3136aa538cfc4a")
_UNET_DATA = """dir_img = Path('./data/imgs/')
import numpy as _np; from PIL import Image as _Image
for _i in range(8):
    _rs = _np.random.RandomState(_i); Path('./data/masks').mkdir(parents=True, exist_ok=True)
    dir_img.mkdir(parents=True, exist_ok=True)
    _Image.fromarray(_rs.randint(0, 256, (64, 64, 3), dtype=_np.uint8)).save(f'data/imgs/{_i}.png')
    _Image.fromarray((_rs.rand(64, 64) > 0.5).astype(_np.uint8)).save(f'data/masks/{_i}_mask.png')"""
PINNED += [
    ("unet-train", *_UNET, "train.py", ["--epochs", "1", "--batch-size", "2", "--amp", "--scale", "0.5"], [
        ("import wandb", "from unittest import mock; wandb = mock.MagicMock()"),
        ("dir_img = Path('./data/imgs/')", _UNET_DATA)]),
]


def _present(git_dir: Path, commit: str, folder: str) -> list[str]:
    """The files of ``folder`` at ``commit`` whose content the mirror holds (a snapshot may list its largest
    files, e.g. a GAN collection's result GIFs, without their blobs, and ``git archive`` fails on those)."""
    git = ["git", "--git-dir", str(git_dir)]
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", commit, *([folder] if folder != "." else [])],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    found = subprocess.run([*git, "cat-file", "--batch-check"], input="".join(f"{commit}:{n}\n" for n in names),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    return [n for n, f in zip(names, found) if not f.endswith(" missing")]


# --- corpus part B: NLP, detection, timm, apex
#: nanoGPT: the configurator's ``--key=value`` overrides; ``configurator.py`` is read relative to the script (the
#: harness runs from another folder) and the token files are generated (np.memmap of train.bin/val.bin)
_NANOGPT = ("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291")
_NANOGPT_TINY = ["--compile=False", "--eval_iters=1", "--log_interval=1", "--batch_size=2", "--block_size=32",
                 "--n_layer=1", "--n_head=2", "--n_embd=32", "--dropout=0.0", "--max_iters=5", "--eval_interval=1000"]
_NANOGPT_PATCHES = [
    ("exec(open('configurator.py').read())",
     "exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configurator.py')).read())"),
    ("data = np.memmap(os.path.join(data_dir, 'train.bin'), dtype=np.uint16, mode='r')",
     "data = np.random.default_rng(0).integers(0, 50304, 4096).astype(np.uint16)"),
    ("data = np.memmap(os.path.join(data_dir, 'val.bin'), dtype=np.uint16, mode='r')",
     "data = np.random.default_rng(1).integers(0, 50304, 4096).astype(np.uint16)"),
]
#: minGPT: the projects import the ``mingpt`` package from the repository root (extracted next to the script)
_MINGPT = ("karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26")
_MINGPT_TINY = ["--trainer.num_workers=0", "--trainer.batch_size=8", "--trainer.max_iters=3"]
_MINGPT_ADDER = [*_MINGPT_TINY, "--data.ndigit=1"]  # its evaluation at step 1 then covers 100 sums, not 10,000
#: NVIDIA apex examples: ``from apex import amp`` (amp.initialize / amp.scale_loss); imagenet at the last commit
#: before the maintainers moved it to torch.amp (c54dbd3a)
_APEX = "NVIDIA/apex"
_APEX_HEAD = "6424da3b4faa6c8f062da4a48c424fff3f02d42d"
_APEX_AMP = "c1378e6f6224a6e832cd92ff459389ac3a128e47"
#: timm: train.py only, on the installed timm package; torchvision's CIFAR10 is generated by the probe
_TIMM = ("huggingface/pytorch-image-models", "aa4b5850c1543fa488abf260f18390eda46cf85d")
_TIMM_TINY = ["--dataset", "torch/cifar10", "--data-dir", "data", "--dataset-download", "--num-classes", "10",
              "--img-size", "32", "-b", "8", "--epochs", "1", "--workers", "0", "--seed", "0", "--log-interval", "1"]
#: makemore: character-level models over a names file (the repository's names.txt, beside the script); TensorBoard (not installed here) is replaced by a no-op writer
_MAKEMORE = ("karpathy/makemore", "988aa59e4d8fefa526d06f3b453ad116258398d4")
_MAKEMORE_TINY = ["-i", "names.txt", "--device", "cuda", "--num-workers", "0", "--max-steps", "5", "-b", "8",
                  "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--n-embd2", "16"]
_MAKEMORE_PATCHES = [("from torch.utils.tensorboard import SummaryWriter",
                      "class SummaryWriter:\n    def __init__(self, *a, **k): pass\n"
                      "    def __getattr__(self, name): return lambda *a, **k: None")]
#: ng-video-lecture: hyperparameters are module constants (made tiny); input.txt is read next to the script
_NGVL = ("karpathy/ng-video-lecture", "52201428ed7b46804849dea0b3ccf0de9df1a5c3")
_NGVL_PATCHES = [("with open('input.txt', 'r', encoding='utf-8') as f:",
                  "with open(__file__.rsplit('/', 1)[0] + '/input.txt', 'r', encoding='utf-8') as f:"),
                 ("eval_iters = 200", "eval_iters = 1")]
PINNED += [
    ("makemore-transformer", *_MAKEMORE, "makemore.py", [*_MAKEMORE_TINY, "--type", "transformer"],
     _MAKEMORE_PATCHES),
    ("ngvl-bigram", *_NGVL, "bigram.py", [], _NGVL_PATCHES),
    ("ngvl-gpt", *_NGVL, "gpt.py", [], [*_NGVL_PATCHES, ("batch_size = 64", "batch_size = 4"),
                                         ("block_size = 256", "block_size = 16"), ("n_embd = 384", "n_embd = 24"),
                                         ("n_layer = 6", "n_layer = 1")]),
    ("nanogpt-train", *_NANOGPT, "train.py", _NANOGPT_TINY, _NANOGPT_PATCHES),
    ("nanogpt-train-fp16", *_NANOGPT, "train.py", [*_NANOGPT_TINY, "--dtype=float16"], _NANOGPT_PATCHES),
    # the script's own torch.compile switch: `run` passes it through; on the emulated npu Inductor compiles it
    ("nanogpt-train-compile", *_NANOGPT, "train.py", [*_NANOGPT_TINY, "--compile=True"], _NANOGPT_PATCHES),
    ("mingpt-adder", *_MINGPT, "projects/adder/adder.py", _MINGPT_ADDER, []),
    ("mingpt-chargpt", *_MINGPT, "projects/chargpt/chargpt.py",
     [*_MINGPT_TINY, "--data.block_size=16", "--model.model_type=gpt-nano"],
     [("text = open('input.txt', 'r').read()",
       "text = 'O God, O God! generated text for a tiny char-level model. ' * 64")]),  # its sampling prompt's chars
    ("apex-dcgan", _APEX, _APEX_HEAD, "examples/dcgan/main_amp.py",
     ["--dataset", "fake", "--batchSize", "4", "--imageSize", "64", "--niter", "1", "--workers", "0", "--nz", "16",
      "--ngf", "8", "--ndf", "8"],
     # the script's own bug with torch >= 1.7: torch.full(.., 1) is int64, BCEWithLogitsLoss needs a float target
     # (pytorch/examples' dcgan made the same change: real_label = 1.)
     [("real_label = 1\n", "real_label = 1.\n"), ("fake_label = 0\n", "fake_label = 0.\n")]),
    ("apex-simple", _APEX, _APEX_HEAD, "examples/simple/distributed/distributed_data_parallel.py", [], []),
    ("apex-imagenet", _APEX, _APEX_AMP, "examples/imagenet/main_amp.py",
     ["-a", "resnet18", "-b", "8", "--epochs", "1", "--workers", "0", "--opt-level", "O1", "data"], []),
    ("timm-train", *_TIMM, "train.py", _TIMM_TINY, []),
    ("timm-train-amp", *_TIMM, "train.py", [*_TIMM_TINY, "--amp"], []),
    ("timm-train-compile", *_TIMM, "train.py", [*_TIMM_TINY, "--torchcompile"], []),
]
#: sgrvinod's SSD300 tutorial (VGG-16 base; device chosen in train.py, model.py and utils.py alike): the VOC json
#: lists are generated (8 small images, 1-2 boxes each), the ImageNet VGG-16 download is skipped (random base,
#: as ``weights=None``) and the iteration-to-epoch arithmetic (len(dataset) // 32 == 0 here) is replaced by 1 epoch
_SSD = ("sgrvinod/a-PyTorch-Tutorial-to-Object-Detection", "5d5b75968c3cf1ffd2718bf828a7560b7ee8e8b5")
_SSD_DATA = """data_folder = './data'
import json as _json, numpy as _np; from PIL import Image as _Image; os.makedirs(data_folder, exist_ok=True)
_imgs, _objs = [], []
for _i in range(8):
    _rs = _np.random.RandomState(_i); _f = os.path.join(data_folder, f'{_i}.jpg'); _imgs.append(_f)
    _Image.fromarray(_rs.randint(0, 256, (96, 128, 3), dtype=_np.uint8)).save(_f)
    _b = [[int(x), int(y), int(x) + 40, int(y) + 30] for x, y in _rs.randint(0, 60, (1 + _i % 2, 2))]
    _objs.append({'boxes': _b, 'labels': [int(c) for c in _rs.randint(1, 21, len(_b))], 'difficulties': [0] * len(_b)})
for _n, _v in (('TRAIN_images.json', _imgs), ('TRAIN_objects.json', _objs)):
    with open(os.path.join(data_folder, _n), 'w') as _j: _json.dump(_v, _j)"""
PINNED += [
    ("ssd300-train", *_SSD, "train.py", [], [
        ("data_folder = './'", _SSD_DATA),
        ("from model import SSD300, MultiBoxLoss",
         "from model import SSD300, MultiBoxLoss, VGGBase\nVGGBase.load_pretrained_layers = lambda self: None"),
        ("batch_size = 8", "batch_size = 2"), ("workers = 4", "workers = 0"), ("print_freq = 200", "print_freq = 1"),
        ("epochs = iterations // (len(train_dataset) // 32)", "epochs = 1"),
        ("decay_lr_at = [it // (len(train_dataset) // 32) for it in decay_lr_at]", "decay_lr_at = []")]),
]
#: DETR (facebookresearch/detr): a COCO-style dataset is generated under ``data/`` (8 train and 2 val images of
#: 96x128, 1-2 boxes each; pycocotools reads the json), the ImageNet backbone download is skipped (its
#: ``pretrained=is_main_process()``), the 480-800 px multi-scale transforms become flip + normalize, and the
#: model is small (resnet18, one encoder and decoder layer)
_DETR = ("facebookresearch/detr", "29901c51d7fe8712168b8d0d64351170bc0f83e0")
_DETR_DATA = """def main(args):
    import numpy as _np; from PIL import Image as _Image
    for _split, _n in (('train', 8), ('val', 2)):
        _imgs, _anns = [], []
        Path(args.coco_path, f'{_split}2017').mkdir(parents=True, exist_ok=True)
        for _i in range(_n):
            _rs = _np.random.RandomState(_i + (100 if _split == 'val' else 0))
            _Image.fromarray(_rs.randint(0, 256, (96, 128, 3), dtype=_np.uint8)).save(
                Path(args.coco_path, f'{_split}2017', f'{_i}.jpg'))
            _imgs.append({'id': _i, 'file_name': f'{_i}.jpg', 'height': 96, 'width': 128})
            for x, y in _rs.randint(0, 60, (1 + _i % 2, 2)):
                _anns.append({'id': len(_anns) + 1, 'image_id': _i, 'category_id': int(_rs.randint(1, 5)),
                              'bbox': [int(x), int(y), 40, 30], 'area': 1200, 'iscrowd': 0})
        Path(args.coco_path, 'annotations').mkdir(parents=True, exist_ok=True)
        Path(args.coco_path, 'annotations', f'instances_{_split}2017.json').write_text(json.dumps(
            {'images': _imgs, 'annotations': _anns, 'categories': [{'id': c, 'name': str(c)} for c in range(1, 5)]}))"""
_DETR_TINY = ["--coco_path", "data", "--backbone", "resnet18", "--enc_layers", "1", "--dec_layers", "1",
              "--hidden_dim", "32", "--nheads", "2", "--dim_feedforward", "64", "--num_queries", "10",
              "--batch_size", "2", "--num_workers", "0", "--epochs", "1"]
PINNED += [
    ("detr-train", *_DETR, "main.py", _DETR_TINY, [
        ("def main(args):", _DETR_DATA),
        ("from models import build_model",
         "from models import build_model\nimport models.backbone as _bb, datasets.coco as _dc, datasets.transforms as _T\n"
         "_bb.is_main_process = lambda: False\n_dc.make_coco_transforms = lambda image_set: _T.Compose(["
         "_T.RandomHorizontalFlip(), _T.ToTensor(), _T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])")]),
]
# --- corpus part C (issue 30): held-out-style recipes from repositories not in A or B, one family each
#: TensorBoard is not installed here: a writer that writes nothing, with the log folder the real one creates
_NO_TENSORBOARD = ("class SummaryWriter:\n"
                   "    def __init__(self, log_dir=None, *a, **k):\n"
                   "        import os as _os; self.log_dir = log_dir or _os.path.join('runs', 'simclr')\n"
                   "        _os.makedirs(self.log_dir, exist_ok=True)\n"
                   "    def __getattr__(self, name): return lambda *a, **k: None")
#: self-supervised: SimCLR (sthalles), `with torch.cuda.device(args.gpu_index):` around the whole training (TP112),
#: torch.cuda.amp autocast + GradScaler with --fp16-precision, a checkpoint of state_dict + optimizer at the end
_SIMCLR = ("sthalles/SimCLR", "1848fc934ad844ae630e6c452300433fe99acfd9")
#: classic CIFAR trainers: akamaster's ResNets (every model inside nn.DataParallel; the repository ships
#: `module.`-keyed checkpoints saved on cuda:0, loaded with `--resume`; `--half`), weiaicunzai's CIFAR-100
#: (`torch.cuda.memory_summary()` printed after each evaluation with -gpu: TP114)
_AKAMASTER = ("akamaster/pytorch_resnet_cifar10", "d5489e8995e81e91ce6b1d69dcc98ad579b0b153")
_AKA_TINY = ["-a", "resnet20", "--epochs", "1", "-b", "8", "-j", "0", "--print-freq", "1"]
_CIFAR100 = ("weiaicunzai/pytorch-cifar100", "11d8418f415b261e4ae3cb1ffe20d06ec95b98e4")
#: diffusion: dome272's DDPM (device "cuda" as a string default and argument, a sampling loop after each epoch,
#: images and the state_dict written per epoch); 20 noise steps instead of 1,000 (the sampling loop runs them all)
_DDPM = ("dome272/Diffusion-Models-pytorch", "be352208d0576039fec061238c0e4385a562a2d4")
#: vision transformers: kentaroy47's ViT for CIFAR (torch.cuda.amp autocast + GradScaler, `'cuda' in device`,
#: checkpoints with net / optimizer / scaler state); needs einops (installed for the corpus run)
_VITCIFAR = ("kentaroy47/vision-transformers-cifar10", "5bb83d36018b314c3020558541015bb01bce15bc")
#: segmentation: VainF's DeepLabV3+ (model always in nn.DataParallel, `model.module.state_dict()` in its
#: checkpoints, CUDA_VISIBLE_DEVICES set from --gpu_id); a VOC-layout dataset is generated under data/ (8 train and
#: 2 val images of 64x64 with 21-class masks), the ImageNet backbone download is skipped
_DEEPLAB = ("VainF/DeepLabV3Plus-Pytorch", "4e1087de98bc49d55b9239ae92810ef7368660db")
_DEEPLAB_DATA = """def get_dataset(opts):
    import numpy as _np; from PIL import Image as _Image
    _voc = os.path.join(opts.data_root, 'VOCdevkit', 'VOC2012')
    for _sub in ('JPEGImages', 'SegmentationClass', 'ImageSets/Segmentation'):
        os.makedirs(os.path.join(_voc, _sub), exist_ok=True)
    for _split, _n in (('train', 8), ('val', 2)):
        _names = [f'{_split}{_i}' for _i in range(_n)]
        for _i, _name in enumerate(_names):
            _rs = _np.random.RandomState(_i + (100 if _split == 'val' else 0))
            _Image.fromarray(_rs.randint(0, 256, (64, 64, 3), dtype=_np.uint8)).save(os.path.join(_voc, 'JPEGImages', _name + '.jpg'))
            _Image.fromarray(_rs.randint(0, 21, (64, 64), dtype=_np.uint8)).save(os.path.join(_voc, 'SegmentationClass', _name + '.png'))
        with open(os.path.join(_voc, 'ImageSets/Segmentation', _split + '.txt'), 'w') as _f:
            _f.write('\\n'.join(_names))
    return _get_dataset(opts)


def _get_dataset(opts):"""
PINNED += [
    ("simclr-train", *_SIMCLR, "run.py", ["-data", "data", "-dataset-name", "cifar10", "-a", "resnet18", "-j", "0",
                                          "--epochs", "1", "-b", "8", "--fp16-precision", "--log-every-n-steps", "1",
                                          "--out_dim", "16"],
     [("simclr.py", "from torch.utils.tensorboard import SummaryWriter", _NO_TENSORBOARD)]),
    # the shipped checkpoints have no 'epoch' key: `checkpoint['epoch']` raises on a CUDA box too
    ("akamaster-resume", *_AKAMASTER, "trainer.py", [*_AKA_TINY, "--resume", "resnet20-12fca82f.th"],
     [("args.start_epoch = checkpoint['epoch']", "args.start_epoch = checkpoint.get('epoch', 0)"),
      (".format(args.evaluate, checkpoint['epoch']))", ".format(args.evaluate, checkpoint.get('epoch', 0)))")]),
    ("akamaster-half", *_AKAMASTER, "trainer.py", [*_AKA_TINY, "--half"], []),
    ("cifar100-train", *_CIFAR100, "train.py", ["-net", "resnet18", "-gpu", "-b", "8"],
     [("from torch.utils.tensorboard import SummaryWriter", _NO_TENSORBOARD), ("num_workers=4", "num_workers=0")]),
    ("ddpm-train", *_DDPM, "ddpm.py", [],
     [("from torch.utils.tensorboard import SummaryWriter", _NO_TENSORBOARD), ("args.epochs = 500", "args.epochs = 1"),
      ("args.batch_size = 12", "args.batch_size = 4"), ("noise_steps=1000", "noise_steps=20")]),
    # `usewandb = ~args.nowandb` is always truthy (~True == -2): the script's own bug, wandb imported on CUDA too;
    # utils.progress_bar reads the terminal width with `stty size` at import (no terminal here); pandas is imported
    # and never used (not installed here)
    ("vit-cifar10", *_VITCIFAR, "train_cifar10.py",
     ["--net", "vit_tiny", "--bs", "8", "--n_epochs", "1", "--dimhead", "64", "--patch", "4", "--nowandb"],
     [("usewandb = ~args.nowandb", "usewandb = not args.nowandb"), ("from utils import progress_bar",
                                                                     "progress_bar = lambda *a, **k: None"),
      ("import pandas as pd\n", ""), ("num_workers=8", "num_workers=0")]),
    ("deeplab-voc", *_DEEPLAB, "main.py",
     ["--data_root", "data", "--model", "deeplabv3plus_mobilenet", "--batch_size", "2", "--val_batch_size", "2",
      "--crop_size", "64", "--crop_val", "--total_itrs", "4", "--val_interval", "2", "--output_stride", "16"],
     # visdom (not installed here) is imported by utils/ even when --enable_vis is off (the default)
     [("def get_dataset(opts):", _DEEPLAB_DATA), ("num_workers=2", "num_workers=0"),
      ("from utils.visualizer import Visualizer", "Visualizer = None"),
      ("utils/__init__.py", "from .visualizer import Visualizer", "Visualizer = None"),
      ("(num_classes=opts.num_classes, output_stride=opts.output_stride)",
       "(num_classes=opts.num_classes, output_stride=opts.output_stride, pretrained_backbone=False)")]),
]
#: what to extract for a recipe when it is not the script's folder: paths from the repository root, each put
#: next to the script (``mingpt/`` beside ``adder.py``); the script's own path must be among them
EXTRACT: dict[str, list[str]] = {
    "mingpt-adder": ["projects/adder", "mingpt"],
    "mingpt-chargpt": ["projects/chargpt", "mingpt"],
    "nanogpt-train": ["train.py", "model.py", "configurator.py"],
    "nanogpt-train-fp16": ["train.py", "model.py", "configurator.py"],
    "nanogpt-train-compile": ["train.py", "model.py", "configurator.py"],
    "timm-train": ["train.py"],
    "timm-train-amp": ["train.py"],
    "timm-train-compile": ["train.py"],
    "detr-train": ["main.py", "engine.py", "datasets", "models", "util"],
    "akamaster-resume": ["trainer.py", "resnet.py", "pretrained_models/resnet20-12fca82f.th"],
    "akamaster-half": ["trainer.py", "resnet.py"],
    "simclr-train": ["run.py", "simclr.py", "utils.py", "data_aug", "models", "exceptions"],
    "vit-cifar10": ["train_cifar10.py", "utils.py", "randomaug.py", "models"],
    "deeplab-voc": ["main.py", "datasets", "network", "metrics", "utils"],
}


def pinned_corpus(mirrors: Path, dest: Path, only: list[str] | None = None) -> list[Script]:
    """Check out each PINNED recipe (those named in ``only``, when given) from ``mirrors/<owner>+<name>`` (bare
    repositories) into ``dest``."""
    scripts = []
    unknown = sorted(set(only or ()) - {r[0] for r in PINNED})
    if unknown:
        raise SystemExit(f"error: no pinned recipe named {', '.join(unknown)}; known: {', '.join(r[0] for r in PINNED)}")
    for name, repo, commit, path, args, patches in PINNED:
        if only and name not in only:
            continue
        base = mirrors / repo.replace("/", "+")
        git_dir = base / "repo" if (base / "repo").exists() else base
        if not git_dir.is_dir():
            raise SystemExit(f"error: recipe {name} needs a mirror of {repo} at {base}; fetch it (a bare repository, "
                             f"as the session's fetch tool leaves it) or pass --mirrors")
        root = dest / name
        root.mkdir(parents=True, exist_ok=True)
        for part in EXTRACT.get(name, [str(Path(path).parent)]):
            # the script's folder is flattened into root; any other part keeps its own name (mingpt/)
            strip = len(Path(part).parts) if part == str(Path(path).parent) else len(Path(part).parent.parts)
            archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", commit, "--",
                                      *_present(git_dir, commit, part)], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(root), *(["--strip-components", str(strip)] if strip else [])],
                           input=archive, check=True)
        target = root / Path(path).name
        for patch in patches:  # (old, new) patches the script; (file, old, new) another file of the recipe
            rel, old, new = patch if len(patch) == 3 else (Path(path).name, *patch)
            text = (root / rel).read_text(encoding="utf-8")
            if old not in text:
                raise SystemExit(f"recipe {name}: patch anchor {old!r} not found at {repo}@{commit[:8]}:{rel}")
            (root / rel).write_text(text.replace(old, new), encoding="utf-8")
        script = Script(name, target, args, source=f"{repo}@{commit[:8]}{'^' if commit.endswith('^') else ''}:{path}",
                        root=root)
        port = next((r[6] for r in MAINTAINER_PORTS if r[0] == name), None)
        if port is not None:
            diff = subprocess.run(["git", "--git-dir", str(git_dir), "diff", "-U0", f"{port}^", port, "--", path],
                                  capture_output=True, text=True, check=True).stdout.splitlines()
            script.maintainer_lines = sum(1 for ln in diff if ln.startswith(("+", "-"))
                                          and not ln.startswith(("+++", "---")))
        scripts.append(script)
    return scripts


def _cell(m: ModeResult | None) -> str:
    if m is None:
        return "-"
    if m.ok:
        return f"ok ({len(m.ranks)} rank{'s' if len(m.ranks) != 1 else ''})"
    return f"FAIL: {m.error or ('rc ' + str(m.rc) + ', no steps' if m.rc == 0 else 'rc ' + str(m.rc))}"


def _saved(r: Row) -> str:
    """``torch.save`` calls / files written by the original under run, per device."""
    cells = []
    for dev in ("cpu", "npu"):
        m = r.modes.get(f"run {dev}")
        if m is not None:
            cells.append(f"{dev} {sum(len(v) for v in m.saves.values())}/{len(m.files)}")
    return ", ".join(cells) or "-"


def changed_by_state(r: Row) -> list[str]:
    """The devices where the saved-state comparison turned an equivalent training record into a failure."""
    return [d for d, v in r.equivalent.items() if r.training_only.get(d) == "yes" and v != "yes"]


def markdown(rows: list[Row]) -> str:
    """The corpus table (one row per script)."""
    lines = ["| script | source | " + " | ".join(MODES) + " | equivalent cpu | equivalent npu | saved (run): "
             "torch.save calls / files | verdict changed by saved state | fix: findings left | fix fails where run "
             "works | ... at a line a finding was left at | fix: imports torchport | fix: lines changed | "
             "maintainers: lines changed |",
             "|" + "---|" * (len(MODES) + 12)]
    for r in rows:
        cells = [_cell(r.modes.get(m)) for m in MODES]
        eq = [r.equivalent.get(d, "-") for d in ("cpu", "npu")]
        lines.append(f"| {r.script.name} | {r.script.source} | " + " | ".join(cells) + f" | {eq[0]} | {eq[1]} | "
                     f"{_saved(r)} | {', '.join(changed_by_state(r)) or '-'} | {sum(map(len, r.left.values()))} | "
                     f"{'; '.join(f'{d}: {w}' for d, w in r.fails_where_run_works().items()) or '-'} | "
                     f"{'; '.join(f'{d}: {w}' for d, w in r.crashes_at_finding().items()) or '-'} | "
                     f"{'yes' if r.fixed_imports_torchport else 'no'} | {r.lines_changed} | "
                     f"{'-' if r.script.maintainer_lines is None else r.script.maintainer_lines} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", choices=("own", "pinned"), default="own")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--only", nargs="*", help="script names to run")
    ap.add_argument("--devices", default="cpu,npu")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--fake-size", type=int, default=64,
                    help="images per generated torchvision dataset (small: an epoch ends, so checkpoints get saved)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per mode (raise it on a loaded host)")
    ap.add_argument("--unsafe-fixes", action="store_true")
    ap.add_argument("--emit", choices=("torchport", "torch"), default="torchport",
                    help="what `torchport fix` writes for the fix modes")
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        scripts = own_corpus() if args.corpus == "own" else pinned_corpus(args.mirrors, Path(tmp), args.only)
        if args.only:
            scripts = [s for s in scripts if s.name in args.only]
        rows = []
        for s in scripts:
            row = check(s, steps=args.steps, devices=tuple(args.devices.split(",")), unsafe=args.unsafe_fixes,
                        emit=args.emit, fake_size=args.fake_size, timeout=args.timeout)
            rows.append(row)
            print(f"{s.name}: " + ", ".join(f"{m}={_cell(row.modes.get(m))}" for m in MODES)
                  + f"; equivalent {row.equivalent}", file=sys.stderr)
    table = markdown(rows)
    sys.stdout.write(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps([{
            "script": r.script.name, "source": r.script.source, "equivalent": r.equivalent,
            "training_only": r.training_only, "changed_by_saved_state": changed_by_state(r),
            "left": r.left, "crashes_at_finding": r.crashes_at_finding(),
            "fails_where_run_works": r.fails_where_run_works(),
            "modes": {m: {"rc": v.rc, "ranks": len(v.ranks), "error": v.error, "saves": v.saves, "files": v.files,
                          "failed_at": v.failed_at}
                      for m, v in r.modes.items()},
            "imports_torchport": r.fixed_imports_torchport, "lines_changed": r.lines_changed,
            "maintainer_lines": r.script.maintainer_lines} for r in rows],
            indent=2), encoding="utf-8")
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
