"""Emulated-NPU overhead: fp32 training-step time on emulated ``npu`` relative to plain CPU.

Both are measured in the same run, interleaved (CPU step, npu step, CPU step, ...), on
the same model, batch and data; the ratio of the medians is printed. Target: <= 1.5x on resnet18
(issue 21; measured 2026-12-01 before/after the move to a C++ device: 1.14-1.43x -> 0.96-1.13x).

usage: .venv/bin/python benchmarks/bench_emulator.py [--steps 20] [--batch 32] [--size 32] [--threads 1]
                                                   [--model smallcnn|resnet18] [--amp] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch


def small_cnn(num_classes: int = 10) -> torch.nn.Module:
    """4 conv-BN-ReLU blocks + linear head (~0.3M params): a typical CI-sized CNN."""
    layers: list[torch.nn.Module] = []
    ch = 3
    for width in (32, 64, 128, 128):
        layers += [torch.nn.Conv2d(ch, width, 3, padding=1, bias=False), torch.nn.BatchNorm2d(width),
                   torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2)]
        ch = width
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(ch, num_classes)]
    return torch.nn.Sequential(*layers)


def build(name: str) -> torch.nn.Module:
    if name == "resnet18":
        import torchvision

        return torchvision.models.resnet18(num_classes=10)
    return small_cnn()


def make_step(model: torch.nn.Module, device: str, x: torch.Tensor, y: torch.Tensor, amp: bool):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device, enabled=amp)
    x, y = x.to(device), y.to(device)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()  # sync point, as in a real loop

    return step


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--model", default="smallcnn", choices=["smallcnn", "resnet18"])
    p.add_argument("--amp", action="store_true", help="also time fp16 AMP on the emulated npu")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: stable numbers on a shared machine; 0 = torch default)")
    p.add_argument("--json", default=None, help="write the results to this file")
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    import torchport.emulate

    torchport.emulate.install(devices=1)
    torch.manual_seed(0)
    base = build(args.model)
    x = torch.randn(args.batch, 3, args.size, args.size)
    y = torch.randint(0, 10, (args.batch,))
    cpu_model = build(args.model)
    cpu_model.load_state_dict(base.state_dict())
    steps = {"cpu": make_step(cpu_model, "cpu", x, y, False), "npu": make_step(base, "npu", x, y, False)}
    if args.amp:
        amp_model = build(args.model)
        amp_model.load_state_dict(cpu_model.state_dict())
        steps["npu_amp"] = make_step(amp_model, "npu", x, y, True)
    times: dict[str, list[float]] = {k: [] for k in steps}
    for i in range(args.warmup + args.steps):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "model": args.model, "batch": args.batch, "size": args.size, "steps": args.steps,
        "threads": torch.get_num_threads(),
        "cpu_step_ms": round(med["cpu"] * 1e3, 2),
        "npu_step_ms": round(med["npu"] * 1e3, 2),
        "ratio_npu_over_cpu": round(med["npu"] / med["cpu"], 3),
    }
    if "npu_amp" in med:
        result["npu_amp_step_ms"] = round(med["npu_amp"] * 1e3, 2)
    print(f"model={args.model} batch={args.batch} input={args.size}x{args.size} steps={args.steps} "
          f"threads={result['threads']}")
    print(f"cpu fp32 step      {result['cpu_step_ms']:9.2f} ms")
    print(f"emulated npu step  {result['npu_step_ms']:9.2f} ms")
    if "npu_amp_step_ms" in result:
        print(f"emulated npu AMP   {result['npu_amp_step_ms']:9.2f} ms")
    print(f"ratio npu/cpu      {result['ratio_npu_over_cpu']:9.3f}x   (target <= 1.5x on resnet18)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
