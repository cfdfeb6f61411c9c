"""torch.compile vs eager, on the CPU and on the emulated npu: step time ratio and max difference.

For each device (cpu, then npu with the emulator installed in this process) and each backend: two copies of
tinycnn (torchport.models) with the same weights, one eager and one ``torch.compile(model, backend=...)``, train
on the same batches with SGD; the first compiled step (compile time) is reported apart as warm-up; the median
step time of the remaining steps is compared (ratio compiled / eager, measured in the same run, interleaved).
Max diff: the largest absolute difference of the losses over the steps and of the parameters after them
(forward and backward both feed it).

usage: .venv/bin/python benchmarks/bench_compile.py [--steps 6] [--batch 8] [--size 32]
                                                    [--backends inductor,aot_eager] [--devices cpu,npu] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time

import torch


def _measure(device: str, backend: str, steps: int, batch: int, size: int) -> dict:
    from torchport.models import tinycnn

    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = tinycnn(10).to(device)
    comp_model = copy.deepcopy(eager)
    compiled = torch.compile(comp_model, backend=backend)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    opt_c = torch.optim.SGD(comp_model.parameters(), lr=0.05)
    data = [(torch.randn(batch, 3, size, size).to(device), torch.randint(0, 10, (batch,)).to(device))
            for _ in range(steps + 1)]

    def step(model, opt, x, y) -> tuple[float, float]:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()
        return time.perf_counter() - t0, value

    times_e, times_c = [], []
    warm_c, lc = step(compiled, opt_c, *data[0])
    warm_e, le = step(eager, opt_e, *data[0])
    loss_diff = abs(le - lc)
    for x, y in data[1:]:
        tc, lc = step(compiled, opt_c, x, y)
        te, le = step(eager, opt_e, x, y)
        times_c.append(tc)
        times_e.append(te)
        loss_diff = max(loss_diff, abs(le - lc))
    param_diff = max((a - b).abs().max().item() for a, b in zip(eager.parameters(), comp_model.parameters()))
    med_e, med_c = statistics.median(times_e), statistics.median(times_c)
    return {"device": device, "backend": backend, "first_compiled_step_s": round(warm_c, 2),
            "eager_step_ms": round(med_e * 1e3, 2), "compiled_step_ms": round(med_c * 1e3, 2),
            "ratio_compiled_over_eager": round(med_c / med_e, 3), "max_loss_diff": loss_diff,
            "max_param_diff": param_diff, "steps": steps, "batch": batch, "size": size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--backends", default="inductor,aot_eager")
    ap.add_argument("--devices", default="cpu,npu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for device in args.devices.split(","):
        if device == "npu":
            import torchport.emulate as emulate

            emulate.install()
        for backend in args.backends.split(","):
            row = _measure(device, backend, args.steps, args.batch, args.size)
            rows.append(row)
            print(f"{device:4} {backend:10} first compiled step {row['first_compiled_step_s']:7.2f} s   "
                  f"eager {row['eager_step_ms']:8.2f} ms  compiled {row['compiled_step_ms']:8.2f} ms  "
                  f"ratio {row['ratio_compiled_over_eager']:.3f}   max |loss diff| {row['max_loss_diff']:.2e}  "
                  f"max |param diff| {row['max_param_diff']:.2e}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
