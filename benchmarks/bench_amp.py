"""FP32 vs AMP on the selected device, printed as the seed table; the ratio is AMP / FP32 throughput.

Baseline: FP32 on the same device in the same run. Seed reference (Ascend 910B3,
ResNet-50, batch 64, 224x224): 545 -> 1254 img/s (2.30x), peak HBM 5651 -> 2924 MB.

Usage::

    python benchmarks/bench_amp.py                    # resnet50-224 preset on an accelerator, small on cpu
    python benchmarks/bench_amp.py --preset tiny
    TORCHPORT_EMULATE=npu python benchmarks/bench_amp.py --preset tiny --json npu.json
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=None, help="tiny | small | resnet50-224 (default: resnet50-224 on an accelerator, small on cpu)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import torchport
    from torchport.bench.amp_bench import BenchConfig, run_bench
    from torchport.bench.report import print_bench, write_json
    from torchport.workload import from_preset

    target = torchport.select_device(args.device) if args.device else torchport.current()
    name = args.preset or ("resnet50-224" if target.is_accelerator else "small")
    workload, p = from_preset(name, channels_last=args.channels_last or None)
    cfg = BenchConfig(workload=workload, windows=p.windows, steps_per_window=p.steps_per_window, warmup=p.warmup,
                      device=args.device)
    report = run_bench(cfg, progress=lambda m: print(m, file=sys.stderr)).to_dict()
    print_bench(report)
    comp = report["comparison"]
    mem = "n/a" if comp["memory_change"] is None else f"{comp['memory_change'] * 100:+.0f}%"
    print(f"preset {name} on {report['device']} ({report['backend']}): AMP/FP32 throughput ratio "
          f"{comp['speedup']:.2f}x, peak memory change {mem}  (seed, Ascend 910B3: 2.30x, -48%)")
    if args.json:
        write_json(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
