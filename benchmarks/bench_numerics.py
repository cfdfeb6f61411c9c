"""The cards' default numerics (issue 34): the drift table and the emulator's speed per numerics mode.

``drift``: the reference trainer's target (tinycnn 32px, resnet18 64px) trained from one seed checkpoint on
the same batches in four numerics (:data:`torchport.checks.predict.VARIANTS`): fp32, the npu's default (HF32
convolutions), HF32 everywhere (conv + matmul), the CUDA default (TF32 convolutions); the loss at chosen
steps and its relative drift from fp32, the weight norm at the end.

``speed``: one training step (resnet18 or the small CNN, SGD) timed interleaved per mode -- CPU fp32 (the
baseline), CPU under ``cuda_numerics`` (TF32 conv), emulated npu exact, emulated npu ``set_numerics("npu")``
(HF32 conv), emulated npu with HF32 conv+matmul -- the ratio of each median to the CPU fp32 median.

usage: .venv/bin/python benchmarks/bench_numerics.py drift [--steps 30] [--models tinycnn,resnet18] [--json F]
       .venv/bin/python benchmarks/bench_numerics.py speed [--model resnet18] [--rounds 8] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch


def _dataset() -> str:
    import tempfile

    from torchport.data.synth import make_dataset

    root = tempfile.mkdtemp(prefix="bench-numerics-") + "/shapes"
    make_dataset(root, classes=4, train_per_class=64, val_per_class=2, size=72)
    return root


def drift(args: argparse.Namespace) -> dict:
    from torchport.checks.predict import VARIANTS, drift_runs
    from torchport.checks.reference import trainer_target

    root = _dataset()
    sizes = {"tinycnn": (32, 16), "resnet18": (64, 8)}
    out: dict = {}
    for name in args.models.split(","):
        size, batch = sizes.get(name, (32, 16))
        target = trainer_target(model=name, image_size=size, batch_size=batch, data=root)
        runs = drift_runs(target, list(VARIANTS), steps=args.steps)
        out[name] = runs
        base = runs["fp32"]["loss"]
        marks = sorted({0, 1, 2, 5, 10, 20, args.steps - 1} & set(range(args.steps)))
        print(f"\n{name} ({size}px, batch {batch}, {args.steps} steps): loss (relative drift from fp32)")
        print("step  " + "  ".join(f"{v:>22s}" for v in VARIANTS))
        for s in marks:
            cells = []
            for v in VARIANTS:
                x = runs[v]["loss"][s]
                cells.append(f"{x:10.6f}" + ("" if v == "fp32" else f" ({abs(x - base[s]) / abs(base[s]):8.2e})"))
            print(f"{s:4d}  " + "  ".join(f"{c:>22s}" for c in cells))
        wn = {v: runs[v]["weight_norm"][-1] for v in VARIANTS}
        print("weight norm entering the last step: " + ", ".join(
            f"{v} {wn[v]:.6f}" + ("" if v == "fp32" else f" ({abs(wn[v] - wn['fp32']) / wn['fp32']:.2e})") for v in VARIANTS))
        print("seconds per variant: " + ", ".join(f"{v} {runs[v]['seconds']:.1f}" for v in VARIANTS))
    return out


def speed(args: argparse.Namespace) -> dict:
    import contextlib

    import torchport.emulate as emulate
    from torchport.emulate import _numerics as N

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_emulator import build

    emulate.install()
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.size, args.size)
    y = torch.randint(0, 10, (args.batch,))

    def make(device: str):
        torch.manual_seed(0)
        model = build(args.model).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        xd, yd = x.to(device), y.to(device)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(xd), yd).backward()
            opt.step()
            float(model.fc.weight[0, 0].detach() if hasattr(model, "fc") else 0.0)   # wait for the step (one scalar)

        return step

    modes = {
        "cpu fp32": ("cpu", contextlib.nullcontext, {}),
        "cpu + cuda tf32 (conv)": ("cpu", emulate.cuda_numerics, {}),
        "npu exact": ("npu", contextlib.nullcontext, {}),
        "npu hf32 conv (default)": ("npu", lambda: N.numerics("npu"), {}),
        "npu hf32 conv+matmul": ("npu", lambda: N.numerics("npu", matmul_hf32=True), {}),
    }
    steps = {k: make(dev) for k, (dev, _, _) in modes.items()}
    times: dict[str, list[float]] = {k: [] for k in modes}
    for k, (_, ctx, _) in modes.items():   # warm-up
        with ctx():
            steps[k]()
    for _ in range(args.rounds):
        for k, (_, ctx, _) in modes.items():
            with ctx():
                t0 = time.perf_counter()
                steps[k]()
                times[k].append(time.perf_counter() - t0)
    base = statistics.median(times["cpu fp32"])
    print(f"\n{args.model}, batch {args.batch}, {args.size}px, {args.rounds} interleaved rounds, "
          f"threads {torch.get_num_threads()} (measured under load)")
    print(f"{'mode':26s} {'median ms':>10s} {'ratio to cpu fp32':>18s}")
    out = {}
    for k in modes:
        med = statistics.median(times[k])
        out[k] = {"median_s": med, "ratio": med / base}
        print(f"{k:26s} {med * 1e3:10.1f} {med / base:18.2f}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    d = sub.add_parser("drift")
    d.add_argument("--steps", type=int, default=30)
    d.add_argument("--models", default="tinycnn,resnet18")
    d.add_argument("--json", default=None)
    s = sub.add_parser("speed")
    s.add_argument("--model", default="resnet18")
    s.add_argument("--batch", type=int, default=16)
    s.add_argument("--size", type=int, default=64)
    s.add_argument("--rounds", type=int, default=8)
    s.add_argument("--json", default=None)
    args = p.parse_args()
    if args.what == "speed":
        torch.set_num_threads(1)
        emulate_prepare()
    out = drift(args) if args.what == "drift" else speed(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


def emulate_prepare() -> None:
    import torchport.emulate

    torchport.emulate.prepare()


if __name__ == "__main__":
    raise SystemExit(main())
