"""The per-rule contract: a file fixed by ``torchport fix`` never does worse than the original under ``torchport run``.

For every rule of the catalogue, ``tests/migrate/contract/<CODE>[_<variant>].py`` is a small script of our own that
exercises the rule -- the lines it fixes and the lines it can only report. The harness copies the folder, fixes the
copy with ``torchport fix --write --unsafe-fixes --select ALL``, and runs four modes, one interpreter each, every
case of the folder in turn (each from a fresh working folder, seeded alike):

* ``run cpu`` / ``run npu`` -- the originals under ``torchport run`` (``--device cpu``; ``TORCHPORT_EMULATE=npu:2``)
* ``fix cpu`` / ``fix npu`` -- the fixed copies with ``TORCHPORT_DEVICE=cpu``; on the emulated npu

What a case leaves is its **observable state**: what it printed, the exception it raised (type and message), its
module-level values (tensors by dtype / shape / device / values, modules by type and ``state_dict``, numbers,
strings ...), every object it passed to ``torch.save`` (and the devices after loading it back), the files it wrote,
the current accelerator index afterwards, and the next draws of torch's CPU generator, the device generator,
Python's and NumPy's. On each device, run and fix **agree** when all of that is equal (names the fix adds, such as
``--emit torch``'s hoisted ``DEVICE``, aside), or when the original fails under ``run`` and the fixed file works
(the fix does better; reverse-dialect cases on the CPU). A fixed file that fails where ``run`` works, or leaves
a different state, is a broken contract.

Each rule's **outcome class** comes from the fixed case: *fixed* (no finding of the rule left), *redirected* (the
fix calls ``torchport.compat``), *reported only* (findings left in the fixed file -- each must be harmless: the
contract still has to hold).

Usage::

    python tools/rule_contract.py                         # table on stdout
    python tools/rule_contract.py --devices cpu --only TP112 TP114
    python tools/rule_contract.py --markdown table.md --json contract.json
    python tools/rule_contract.py --emit torch            # the fix writes torch-only code where torch has the API

Exit status: 0 when every case agrees on every device, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "migrate" / "contract"
PROBE = ROOT / "tools" / "equivalence_probe" / "sitecustomize.py"
MODES = ("run cpu", "run npu", "fix cpu", "fix npu")
NPU_DEVICES = 2
_CLEAR = ("TORCHPORT_DEVICE", "TORCHPORT_EMULATE", "TORCHPORT_REQUIRE_ACCELERATOR", "RANK", "WORLD_SIZE",
          "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHPORT_EQUIV_OUT", "CUDA_VISIBLE_DEVICES")
#: the checkpoint every case's folder starts with, "saved on cuda:0" (a CPU machine cannot save one; the harness
#: tags its storages so, as a GPU-written checkpoint is)
GPU_CHECKPOINT = "gpu_ckpt.pt"


def _probe():
    spec = importlib.util.spec_from_file_location("_equivalence_probe", PROBE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------- the driver
def _write_gpu_checkpoint(path: Path) -> None:
    """``{"weight", "bias", "step"}`` of a small Linear, its storages tagged ``cuda:0`` as torch.save tags a GPU's."""
    import torch
    from torch import serialization

    def tag(obj):
        return "cuda:0" if getattr(obj, "device", None) is not None and obj.device.type == "cpu" else None

    entry = (1, tag, lambda obj, location: None)
    serialization._package_registry.append(entry)
    serialization._package_registry.sort(key=lambda e: e[0])
    try:
        g = torch.Generator().manual_seed(7)
        torch.save({"weight": torch.randn(3, 4, generator=g), "bias": torch.zeros(3), "step": 5}, path)
    finally:
        serialization._package_registry.remove(entry)


def _globals_state(ns: dict, probe, torch) -> dict:
    """The case's module-level values worth comparing (tensors, modules, numbers, strings, containers, devices)."""
    import types

    out = {}
    for name, value in sorted(ns.items()):
        if name.startswith("_") or isinstance(value, (types.ModuleType, types.FunctionType, type)) or callable(value) \
                and not isinstance(value, torch.nn.Module):
            continue
        out[name] = probe.summarize(value, torch)
    return out


def _draws(torch) -> dict:
    import random

    draws = {"cpu": [round(float(v), 6) for v in torch.rand(3)], "python": round(random.random(), 9)}
    try:
        import numpy as np

        draws["numpy"] = round(float(np.random.rand()), 9)
    except ImportError:  # pragma: no cover
        pass
    import torchport

    dev = torchport.current().device
    if dev.type != "cpu":
        draws["device"] = [round(float(v), 6) for v in torch.rand(3, device=dev).cpu()]
        draws["index"] = torch.accelerator.current_device_index()
    return draws


def drive(folder: Path, out: Path) -> int:
    """Run every case of ``folder`` in this process (under ``torchport run`` or not) and write their states."""
    import gc
    import random
    import runpy

    import torch

    probe = _probe()
    saves: list[dict] = []
    orig_save = torch.save

    def save(obj, f, *args, **kwargs):
        result = orig_save(obj, f, *args, **kwargs)
        rec = {"file": str(f) if isinstance(f, (str, os.PathLike)) else "<stream>", "object": probe.summarize(obj, torch)}
        if isinstance(f, (str, os.PathLike)):
            try:
                rec["loaded_devices"] = sorted(probe._devices(torch.load(f, weights_only=False), torch, set()))
            except Exception as exc:  # noqa: BLE001 - the failure is the record
                rec["loaded_devices"] = f"load failed: {type(exc).__name__}"
        saves.append(rec)
        return result

    home = Path.cwd()
    _write_gpu_checkpoint(home / GPU_CHECKPOINT)   # before torch.save is watched
    torch.save = save
    results = {}
    for case in sorted(folder.glob("TP*.py")):
        cwd = home / f"cwd-{case.stem}"
        shutil.rmtree(cwd, ignore_errors=True)
        cwd.mkdir()
        shutil.copy2(home / GPU_CHECKPOINT, cwd / GPU_CHECKPOINT)
        before = {p.name for p in cwd.iterdir()}
        os.chdir(cwd)
        saves.clear()
        gc.collect()  # the previous case's values are freed now, not during this case (memory counters)
        random.seed(0)
        torch.manual_seed(0)
        try:
            import numpy as np

            np.random.seed(0)
        except ImportError:  # pragma: no cover
            pass
        env_before = dict(os.environ)
        buf = io.StringIO()
        error = None
        ns: dict = {}
        try:
            with contextlib.redirect_stdout(buf):
                ns = runpy.run_path(str(case), run_name="__main__")
        except BaseException as exc:  # noqa: BLE001 - a case's failure is part of its state
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        finally:
            os.chdir(home)
        files = {}
        for p in sorted(cwd.rglob("*")):
            if p.is_file() and p.name not in before:
                files[str(p.relative_to(cwd))] = "torch.save" if any(
                    Path(s["file"]).name == p.name for s in saves) else probe_digest(p)
        env = {k: v for k, v in os.environ.items() if env_before.get(k) != v}
        for k in set(os.environ) - set(env_before):
            os.environ.pop(k)
        for k, v in env_before.items():
            os.environ[k] = v
        results[case.stem] = {"stdout": buf.getvalue(), "error": error, "globals": _globals_state(ns, probe, torch),
                              "saves": [dict(s) for s in saves], "files": files, "env": env, "draws": _draws(torch)}
    out.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return 0


def probe_digest(path: Path) -> str:
    import hashlib

    return hashlib.sha1(path.read_bytes()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- the harness
@dataclasses.dataclass
class CaseResult:
    """One case on every device: the verdict per device and the fixed file's remaining findings of its rule."""

    case: str
    rule: str
    verdict: dict[str, str]
    outcome: str
    left: list[str]
    errors: dict[str, str | None]

    @property
    def passed(self) -> bool:
        return all(v.startswith("agree") for v in self.verdict.values())


def _env(device: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    env.update(PYTHONHASHSEED="0", PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    if device == "npu":
        env["TORCHPORT_EMULATE"] = f"npu:{NPU_DEVICES}"
    else:
        env["TORCHPORT_DEVICE"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""  # torch-only fixed code picks its device from torch.accelerator
    return env


def run_mode(mode: str, work: Path, timeout: float) -> tuple[dict, str]:
    kind, device = mode.split()
    here = work / f"mode-{kind}-{device}"
    here.mkdir()
    out = here / "state.json"
    folder = work / ("orig" if kind == "run" else "fixed")
    drive_args = [str(Path(__file__).resolve()), "--drive", str(folder), "--state", str(out)]
    cmd = [sys.executable, "-m", "torchport", "run", *(["--device", "cpu"] if device == "cpu" else []),
           "--format", "none", *drive_args] if kind == "run" else [sys.executable, *drive_args]
    proc = subprocess.run(cmd, cwd=here, env=_env(device), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out.exists():
        return {}, (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return json.loads(out.read_text(encoding="utf-8")), ""


#: a printed line a case marks as differing by design (the fixed file is the faithful one; docs/shim.md lists each)
BY_DESIGN = "by-design:"
_CUDA_NAME = re.compile(r"\bcuda(?::(\d+))?\b")


def canonical(state: dict, device: str, run: bool) -> dict:
    """``state`` with device names spelled by what they mean on ``device``: under ``run`` a ``"cuda:N"`` (string,
    ``torch.device``, printed) *is* device N of the target -- the shim maps it at use -- so it reads ``npu:N`` (``cpu``
    on the CPU); a bare ``"cuda"`` / ``"npu"`` is the current device (``npu:0``: cases end on device 0); CPU indices
    mean nothing (``cpu:1`` is ``cpu``). Lines marked :data:`BY_DESIGN` leave the stdout, kept apart."""
    def name(text: str) -> str:
        if run:
            text = _CUDA_NAME.sub(lambda m: "cpu" if device == "cpu" else f"{device}:{m.group(1) or 0}", text)
        if device == "cpu":
            return re.sub(r"\bcpu:\d+\b", "cpu", text)
        return re.sub(rf"\b{device}\b(?!:)", f"{device}:0", text)

    def walk(value):
        if isinstance(value, str):
            return name(value) if _CUDA_NAME.fullmatch(value) or re.fullmatch(r"(cpu|npu)(:\d+)?", value) else value
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):  # keys are names (argparse's `cuda`), not devices
            return {k: v if k == "keys" else walk(v) for k, v in value.items()}
        return value

    out = dict(state)
    lines = state["stdout"].splitlines()
    out["stdout"] = name("\n".join(ln for ln in lines if not ln.startswith(BY_DESIGN)))
    out["by_design"] = [ln for ln in lines if ln.startswith(BY_DESIGN)]
    for key in ("globals", "saves", "files"):
        out[key] = walk(state[key])
    out["error"] = name(state["error"]) if state["error"] else state["error"]
    return out


def _first_difference(a: dict, b: dict) -> str | None:
    for key in ("error", "stdout", "saves", "files", "env", "draws"):
        if a.get(key) != b.get(key):
            if key == "stdout":
                la, lb = a[key].splitlines(), b[key].splitlines()
                i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
                return f"stdout line {i + 1}: {la[i] if i < len(la) else '<end>'!r} vs {lb[i] if i < len(lb) else '<end>'!r}"
            return f"{key}: {json.dumps(a.get(key))[:200]} vs {json.dumps(b.get(key))[:200]}"
    for name, value in a["globals"].items():
        if name not in b["globals"]:
            return f"global {name!r} missing after fix"
        if b["globals"][name] != value:
            return f"global {name!r}: {json.dumps(value)[:160]} vs {json.dumps(b['globals'][name])[:160]}"
    return None


#: (case, device) -> text the first difference must contain: a difference an unsafe fix makes on purpose, named on its
#: rule's page (a different difference, or none, fails like any other)
DOCUMENTED = {
    ("TP605_scaler", "npu"): "dynamic",   # torch_npu's GradScaler state_dict has a `dynamic` key, torch.amp's has not
}


def compare(run: dict | None, fix: dict | None, device: str = "cpu", case: str = "") -> str:
    """``agree``, ``agree (run fails, fix works)``, ``agree (by design: ...)`` or the first difference."""
    if run is None or fix is None:
        return "not compared (" + ", ".join(n for n, r in (("run", run), ("fix", fix)) if r is None) + " did not run)"
    if run["error"] and not fix["error"]:
        return f"agree (run fails: {run['error'][:80]}; fix works)"
    run, fix = canonical(run, device, run=True), canonical(fix, device, run=False)
    why = _first_difference(run, fix)
    expected = DOCUMENTED.get((case, device))
    if why is not None and expected is not None and expected in why:
        return f"agree (documented difference of an unsafe fix: {why[:120]})"
    if why is not None:
        return f"DIFFER: {why}"
    if expected is not None:
        return f"DIFFER: the documented difference ({expected!r}) is gone: update DOCUMENTED and the rule page"
    if run["by_design"] != fix["by_design"]:
        return "agree (by design: " + "; ".join(f"{a[len(BY_DESIGN):].strip()} vs {b[len(BY_DESIGN):].strip()}"
                                              for a, b in zip(run["by_design"], fix["by_design"]) if a != b) + ")"
    return "agree"


def remaining(fixed: Path) -> dict[str, list[str]]:
    """Per fixed case: the findings ``torchport scan --select ALL`` still reports (``CODE line``)."""
    proc = subprocess.run([sys.executable, "-m", "torchport", "scan", "--isolated", "--select", "ALL",
                           "--output-format", "json", str(fixed)], capture_output=True, text=True, timeout=300)
    data = json.loads(proc.stdout or "{}")
    left: dict[str, list[str]] = {}
    for f in data.get("findings", []):
        left.setdefault(Path(f["file"]).stem, []).append(f"{f['code']}:{f['line']}")
    return left


def outcome(case: str, rule: str, fixed_text: str, left: list[str]) -> str:
    mine = [x for x in left if x.startswith(rule + ":")]
    if mine:
        return "reported only"
    return "redirected to runtime" if "compat." in fixed_text else "fixed"


def check(devices=("cpu", "npu"), only=None, emit="torchport", timeout=600.0, keep: Path | None = None) -> list[CaseResult]:
    work = Path(tempfile.mkdtemp(prefix="rule-contract-", dir=keep))
    try:
        cases = sorted(p for p in CASES.glob("TP*.py") if not only or p.stem.split("_")[0] in only or p.stem in only)
        for sub in ("orig", "fixed"):
            (work / sub).mkdir()
            for p in cases:
                shutil.copy2(p, work / sub / p.name)
        subprocess.run([sys.executable, "-m", "torchport", "fix", "--write", "--isolated", "--unsafe-fixes",
                        "--select", "ALL", "--emit", emit, str(work / "fixed")], capture_output=True, text=True,
                       timeout=300)
        left = remaining(work / "fixed")
        states, failures = {}, {}
        for dev in devices:
            for kind in ("run", "fix"):
                states[f"{kind} {dev}"], failures[f"{kind} {dev}"] = run_mode(f"{kind} {dev}", work, timeout)
        results = []
        for p in cases:
            rule = p.stem.split("_")[0]
            verdict = {}
            for dev in devices:
                r, f = states[f"run {dev}"].get(p.stem), states[f"fix {dev}"].get(p.stem)
                verdict[dev] = compare(r, f, dev, p.stem) if r is not None and f is not None else (
                    "not compared: " + (failures[f"run {dev}"] or failures[f"fix {dev}"]))
            errors = {m: (states[m].get(p.stem) or {}).get("error") for m in states}
            text = (work / "fixed" / p.name).read_text(encoding="utf-8")
            results.append(CaseResult(p.stem, rule, verdict, outcome(p.stem, rule, text, left.get(p.stem, [])),
                                      left.get(p.stem, []), errors))
        return results
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def markdown(results: list[CaseResult]) -> str:
    lines = ["| case | rule | outcome after fix | cpu: run vs fix | npu: run vs fix | findings left (code:line) |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.case} | {r.rule} | {r.outcome} | {r.verdict.get('cpu', '-')} | {r.verdict.get('npu', '-')} "
                     f"| {' '.join(r.left) or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drive", type=Path, help=argparse.SUPPRESS)   # internal: run the cases of a folder
    ap.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--devices", default="cpu,npu")
    ap.add_argument("--only", nargs="*", help="rule codes or case names")
    ap.add_argument("--emit", choices=("torchport", "torch"), default="torchport")
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the work folder under this directory")
    args = ap.parse_args(argv)
    if args.drive is not None:
        return drive(args.drive, args.state)
    results = check(tuple(args.devices.split(",")), args.only, args.emit, keep=args.keep)
    table = markdown(results)
    sys.stdout.write(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2), encoding="utf-8")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
