"""The CPU precision policy, measured: step time in fp32, bf16 autocast and what the policy picks; and a
CUDA-AMP script under ``torchport run`` against the same script in fp32.

Part ``steps`` -- three models (torchport's ``tinycnn``, torchvision's ResNet-18, a small transformer
encoder), each trained a few SGD steps in fp32, in bf16 autocast and in ``torchport.Amp("auto")`` (the
policy), in alternating rounds in one process, so load drift hits all three alike. Baseline: fp32 of the
same round. Printed: median ms/step and the ratio to fp32.

Part ``run`` -- a CUDA-style AMP training script (``torch.autocast("cuda")`` + ``torch.amp.GradScaler("cuda")``,
the pattern of the corpus's AMP scripts) run under ``torchport run`` with AMP on and with AMP off (``--fp32``),
in A B B A rounds of fresh processes; the script times its own steps after warm-up (process start-up is not
in the figure). ``after`` is the policy on this machine; ``before`` imitates the old redirect (CUDA autocast
became bf16 autocast on every CPU) with ``TORCHPORT_CPU_BF16=native``. Target: ``after`` within 10% of fp32
on a CPU without native bf16.

``--imitate-avx2`` re-runs the whole benchmark with torch's kernels capped at AVX2
(``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2``), the CI machines' kind,
when the machine itself has more. The header says which it was (torch's capability and the policy's reason).

Usage::

    python benchmarks/bench_cpu_precision.py                       # both parts
    python benchmarks/bench_cpu_precision.py --part steps --rounds 3 --json cpu_precision.json
    python benchmarks/bench_cpu_precision.py --imitate-avx2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}

# ---------------------------------------------------------------------------------------------- part 1
MODELS = {  # name -> (batch, what)
    "tinycnn": (32, "torchport tinycnn, 64 px"),
    "resnet18": (16, "torchvision ResNet-18, 64 px"),
    "transformer": (16, "transformer encoder, 2 layers, d=128, 4 heads, 64 tokens"),
}


def _build(name: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "transformer":
        class Encoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.emb = nn.Embedding(1000, 128)
                layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
                self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = nn.Linear(128, 10)

            def forward(self, tok):
                return self.head(self.enc(self.emb(tok)).mean(1))
        model = Encoder()
        batch = torch.randint(0, 1000, (16, 64)), torch.randint(0, 10, (16,))
    else:
        from torchport.models import build_model

        model = build_model(name, num_classes=10, image_size=64)
        b = MODELS[name][0]
        batch = torch.randn(b, 3, 64, 64), torch.randint(0, 10, (b,))
    return model, batch


def part_steps(models: list[str], rounds: int, steps: int) -> dict:
    import torch

    import torchport

    target = torchport.select_device("cpu")
    auto = torchport.Amp("auto", target)
    variants = {"fp32": None, "bf16": torch.bfloat16, "policy": auto.dtype}
    out = {}
    for name in models:
        runs = {}
        for v, dtype in variants.items():
            model, batch = _build(name)
            runs[v] = (model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), batch, dtype)

        def step(v: str) -> None:
            model, opt, (x, y), dtype = runs[v]
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for v in variants:   # warm-up: oneDNN primitives, allocator
            step(v)
        times: dict[str, list[float]] = {v: [] for v in variants}
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for v in order:
                step(v)      # untimed: the first step after another variant pays the switch (seen: 2-7x one step)
                t0 = time.perf_counter()
                for _ in range(steps):
                    step(v)
                times[v].append((time.perf_counter() - t0) * 1000.0 / steps)
        med = {v: statistics.median(t) for v, t in times.items()}
        out[name] = {"what": MODELS[name][1], "batch": MODELS[name][0], "ms": med, "rounds_ms": times,
                     "ratio": {v: med[v] / med["fp32"] for v in variants}}
        print(f"  {name}: " + ", ".join(f"{v} {med[v]:.0f} ms ({med[v] / med['fp32']:.2f}x)" for v in variants),
              file=sys.stderr, flush=True)
    return {"policy": auto.precision, "models": out}


# ---------------------------------------------------------------------------------------------- part 2
AMP_SCRIPT = textwrap.dedent('''
    """A CUDA-only AMP training script, as found in the wild: autocast("cuda") + GradScaler("cuda")."""
    import json, sys, time
    import torch, torchvision
    amp = "--fp32" not in sys.argv
    steps, warmup = int(sys.argv[1]), 2
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    x, y = torch.randn(16, 3, 64, 64).cuda(), torch.randint(0, 10, (16,)).cuda()
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000.0)
    print("RESULT " + json.dumps({"ms": sorted(times)[len(times) // 2], "loss": loss.item()}))
''')


def _run_script(path: str, steps: int, fp32: bool, env: dict) -> float:
    cmd = [sys.executable, "-m", "torchport", "run", path, str(steps), *(["--fp32"] if fp32 else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=1800)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"error: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])["ms"]


def part_run(rounds: int, steps: int, before: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cuda_amp_train.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(AMP_SCRIPT)
        variants = {"fp32": (True, {}), "amp (after: policy)": (False, {})}
        if before:
            variants["amp (before: bf16 redirect)"] = (False, {"TORCHPORT_CPU_BF16": "native"})
        times: dict[str, list[float]] = {v: [] for v in variants}
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for v in order:
                fp32, env = variants[v]
                times[v].append(_run_script(path, steps, fp32, env))
                print(f"  run round {r + 1}: {v} {times[v][-1]:.0f} ms/step", file=sys.stderr, flush=True)
    med = {v: statistics.median(t) for v, t in times.items()}
    return {"script": "ResNet-18, batch 16, 64 px, autocast('cuda', fp16) + GradScaler('cuda')", "steps": steps,
            "ms": med, "rounds_ms": times, "ratio": {v: med[v] / med["fp32"] for v in variants}}


# ---------------------------------------------------------------------------------------------- main
def _machine() -> dict:
    import torch

    from torchport.backends.cpu_precision import decide

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        commit = ""
    d = decide("bf16")
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "isa_env": {k: os.environ[k] for k in AVX2_ENV if k in os.environ},
            "bf16_native": d.native, "reason": d.reason, "commit": commit,
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("steps", "run", "both"), default="both")
    ap.add_argument("--models", default="tinycnn,resnet18,transformer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per round and variant")
    ap.add_argument("--no-before", action="store_true", help="part run: skip the old bf16-redirect variant")
    ap.add_argument("--imitate-avx2", action="store_true", help="cap torch's kernels at AVX2 (re-executes)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; also passed to run)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)   # the `run` children
    if args.imitate_avx2 and any(os.environ.get(k) != v for k, v in AVX2_ENV.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **AVX2_ENV})  # before torch loads
    os.environ.pop("TORCHPORT_CPU_BF16", None)   # the policy as a user gets it
    machine = _machine()
    print(f"{machine['cpu']}, {machine['cores']} cores, torch {machine['torch']} {machine['capability']} kernels"
          f"{' (imitated: ' + ' '.join(f'{k}={v}' for k, v in machine['isa_env'].items()) + ')' if machine['isa_env'] else ''}"
          f", {machine['threads']} threads, commit {machine['commit'] or '?'}, {machine['date']}, "
          f"load {machine['load']:.1f}")
    print(f"policy: bf16 {'native' if machine['bf16_native'] else 'not native'} -- {machine['reason']}")
    report: dict = {"machine": machine}
    if args.part in ("steps", "both"):
        report["steps"] = part_steps([m for m in args.models.split(",") if m], args.rounds, args.steps)
        print(f"\nstep time, median of {args.rounds} alternating rounds x {args.steps} steps "
              f"(policy picks {report['steps']['policy']}):\n")
        print("| model | batch | fp32 ms/step | bf16 ms/step | policy ms/step | bf16 / fp32 | policy / fp32 |")
        print("|---|---|---|---|---|---|---|")
        for name, r in report["steps"]["models"].items():
            ms, ra = r["ms"], r["ratio"]
            print(f"| {r['what']} | {r['batch']} | {ms['fp32']:.0f} | {ms['bf16']:.0f} | {ms['policy']:.0f} | "
                  f"{ra['bf16']:.2f}x | {ra['policy']:.2f}x |")
    if args.part in ("run", "both"):
        report["run"] = part_run(args.rounds, max(args.steps, 3), not args.no_before)
        r = report["run"]
        print(f"\n`torchport run` on a CUDA-AMP script ({r['script']}), median of {args.rounds} rounds of fresh "
              f"processes, {r['steps']} timed steps each:\n")
        print("| variant | ms/step | vs fp32 |")
        print("|---|---|---|")
        for v, ms in r["ms"].items():
            print(f"| {v} | {ms:.0f} | {r['ratio'][v]:.2f}x |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
