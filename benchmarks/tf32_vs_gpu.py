"""The CPU TF32 emulation against a real GPU's TF32, ulp distance per op (step "tf32" of gpu_suite.sh).

Per op (mm, bmm, addmm, conv2d forward, conv2d grad input, conv2d grad weight) on the same float32 operands:

* ``gpu_tf32``   the GPU with TF32 on (``torch.backends.cuda.matmul.allow_tf32`` / ``cudnn.allow_tf32``)
* ``gpu_fp32``   the GPU with TF32 off: the accumulation-order noise floor of GPU vs CPU
* ``cpu_<mode>`` the CPU under ``torchport.emulate.cuda_numerics(rounding=<mode>)``, for rne / rna / rz
* ``cpu_fp32``   the CPU without emulation

and prints the median / p99 / max float32 ulp distance of each to ``gpu_tf32`` (JSON with --json).

Self-checks (exit 1 when one fails, the reason printed):
1. TF32 engaged on the GPU: ``gpu_tf32`` differs from ``gpu_fp32`` for the matmul and the conv ops;
2. the emulation explains it: for every op the best rounding's median distance to ``gpu_tf32`` is below
   ``cpu_fp32``'s (rounding the operands moved the CPU towards the GPU's TF32, not away from it).

Usage (a CUDA machine, Ampere or later)::

    python benchmarks/tf32_vs_gpu.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F

from torchport.emulate import cuda_numerics, ulp_distance
from torchport.emulate._numerics import ROUNDINGS


def _ops(g: torch.Generator) -> dict:
    """op name -> (function of tensors, the float32 operands on the CPU)."""
    a, b = torch.randn(256, 512, generator=g), torch.randn(512, 384, generator=g)
    ba, bb = torch.randn(8, 64, 128, generator=g), torch.randn(8, 128, 96, generator=g)
    c = torch.randn(256, 384, generator=g)
    x, w = torch.randn(8, 32, 28, 28, generator=g), torch.randn(64, 32, 3, 3, generator=g)
    gy = torch.randn(8, 64, 26, 26, generator=g)

    def grad_input(x, w, gy):
        return torch.ops.aten.convolution_backward(gy, x, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1,
                                                   (True, False, False))[0]

    def grad_weight(x, w, gy):
        return torch.ops.aten.convolution_backward(gy, x, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1,
                                                   (False, True, False))[1]

    return {
        "mm": (torch.mm, (a, b), "matmul"),
        "bmm": (torch.bmm, (ba, bb), "matmul"),
        "addmm": (torch.addmm, (c, a, b), "matmul"),
        "conv2d": (F.conv2d, (x, w), "conv"),
        "conv2d_grad_input": (grad_input, (x, w, gy), "conv"),
        "conv2d_grad_weight": (grad_weight, (x, w, gy), "conv"),
    }


def _flags(tf32: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def _stats(value: torch.Tensor, ref: torch.Tensor) -> dict:
    """ulp distance (median / p99 / max; the max is dominated by results near zero, where one ulp is tiny)
    and the largest absolute difference relative to the largest magnitude of the reference."""
    d = ulp_distance(value, ref).flatten().double()
    rel = float((value.double() - ref.double()).abs().max() / ref.double().abs().max().clamp_min(1e-30))
    return {"median": float(d.median()), "p99": float(torch.quantile(d[:1_000_000], 0.99)), "max": float(d.max()),
            "max_abs_rel": rel}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the table as JSON to this file")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: no CUDA device: this step needs a GPU (Ampere or later)", file=sys.stderr)
        return 2
    torch.backends.cudnn.deterministic = True   # one algorithm per run (the distance is then reproducible)
    g = torch.Generator().manual_seed(args.seed)
    table: dict = {}
    failures: list[str] = []
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        for name, (fn, operands, family) in _ops(g).items():
            dev = [t.cuda() for t in operands]
            _flags(True)
            gpu_tf32 = fn(*dev).cpu()
            _flags(False)
            gpu_fp32 = fn(*dev).cpu()
            cpu_fp32 = fn(*operands)
            _flags(True)   # the emulation reads the same flags: TF32 on for both families
            rows = {"gpu_fp32": gpu_fp32, "cpu_fp32": cpu_fp32}
            for mode in ROUNDINGS:
                with cuda_numerics(mode):
                    rows[f"cpu_{mode}"] = fn(*operands)
            _flags(False)
            table[name] = {k: _stats(v, gpu_tf32) for k, v in rows.items()}
            table[name]["family"] = family
            if torch.equal(gpu_tf32, gpu_fp32):
                failures.append(f"{name}: the GPU's TF32 result equals its FP32 result (TF32 did not engage: "
                                f"{torch.cuda.get_device_name(0)}, compute capability {torch.cuda.get_device_capability(0)})")
            best = min(ROUNDINGS, key=lambda m: table[name][f"cpu_{m}"]["median"])
            table[name]["best"] = best
            if not table[name][f"cpu_{best}"]["median"] < table[name]["cpu_fp32"]["median"]:
                failures.append(f"{name}: the emulation ({best}) is not closer to the GPU's TF32 than plain CPU FP32 "
                                f"({table[name][f'cpu_{best}']['median']} vs {table[name]['cpu_fp32']['median']} ulp)")
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    cols = ["gpu_fp32", "cpu_fp32", *[f"cpu_{m}" for m in ROUNDINGS]]
    print(f"ulp distance to the GPU's TF32 result (median / p99 / max), {torch.cuda.get_device_name(0)}")
    print(f"{'op':20s} " + " ".join(f"{c:>22s}" for c in cols) + "  best")
    for name, row in table.items():
        cells = " ".join(f"{row[c]['median']:>7.0f}/{row[c]['p99']:>6.0f}/{row[c]['max']:>7.0f}" for c in cols)
        print(f"{name:20s} {cells}  {row['best']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "ops": table,
                       "failures": failures}, fh, indent=1)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
