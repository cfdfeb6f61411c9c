"""Runtime-layer overhead: a training step written with torchport's API vs the same step in plain torch.

Both loops run in the same process on the same device, model, data and precision.
By default single steps alternate (A B B A ...), each timed between device syncs, so
machine noise hits both alike; ``--interleave window`` alternates whole windows instead
(keeps asynchronous execution, needs a quiet machine). The ratio is torchport time /
plain-torch time per step, median over paired rounds (each side's best round is printed too).
Target: <= 1.01x. Runs torch single-threaded by default (``--threads``): on a small
shared host a second OpenMP thread makes step times swing by 10x.

torchport loop: ``select_device``, ``to_device``, ``Amp.autocast/backward/step``.
plain loop: ``tensor.to(device)``, ``torch.autocast``, ``torch.amp.GradScaler`` by hand.
Both copy pageable host batches with a blocking copy (torchport goes ``non_blocking`` only
from pinned memory). Finally it prints the host cost per call of the API pieces.

Two workloads: ``mlp`` (a ~1 ms step, where any Python overhead shows) and
``resnet18`` (a realistic step, 16 x 64x64).

Usage::

    python benchmarks/bench_runtime_overhead.py
    TORCHPORT_EMULATE=npu python benchmarks/bench_runtime_overhead.py --precision fp16
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import torchport
from torchport.workload import Workload, amp_precision, build_model, host_batches

TARGET_RATIO = 1.01


def _sync() -> None:
    """Device sync around the measurement windows."""
    torchport.synchronize()


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))


def _mlp_batches():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)) for _ in range(2)]


def _workloads():
    wl = Workload(model="resnet18", batch=16, size=64, num_classes=10)
    return {"mlp": (_mlp, _mlp_batches), "resnet18": (lambda: build_model(wl), lambda: host_batches(wl, 2))}


def torchport_loop(model, batches, precision: str):
    """The step as a torchport user writes it."""
    target = torchport.current()
    model = model.to(target.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp = torchport.Amp(precision)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i: int) -> None:
        x, y = torchport.to_device(batches[i % len(batches)])
        with amp.autocast():
            loss = loss_fn(model(x), y)
        amp.backward(loss)
        amp.step(opt)
        opt.zero_grad(set_to_none=True)

    return step


def plain_loop(model, batches, precision: str):
    """The same step written by hand against torch."""
    device = torchport.current().device  # same device; everything below is plain torch
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i: int) -> None:
        x, y = batches[i % len(batches)]
        x, y = x.to(device), y.to(device)  # pageable host memory: a blocking copy, as torchport does
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _window(step, steps: int) -> float:
    _sync()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    _sync()
    return (time.perf_counter() - t0) / steps


def _paired_steps(a, b, steps: int) -> tuple[float, float]:
    """Alternate single steps of ``a`` and ``b`` (a b b a ...), each timed between syncs; total seconds each."""
    ta = tb = 0.0
    for i in range(steps):
        for fn in ((a, b) if i % 2 == 0 else (b, a)):
            _sync()
            t0 = time.perf_counter()
            fn(i)
            _sync()
            dt = time.perf_counter() - t0
            if fn is a:
                ta += dt
            else:
                tb += dt
    return ta / steps, tb / steps


def measure(name: str, precision: str, rounds: int, steps: int, mode: str) -> float:
    make_model, make_batches = _workloads()[name]
    batches = make_batches()
    tp = torchport_loop(make_model(), batches, precision)
    pl = plain_loop(make_model(), batches, precision)
    for fn in (tp, pl):  # warm-up
        _window(fn, max(2, steps // 4))
    ratios, t_tp, t_pl = [], [], []
    for r in range(rounds):
        if mode == "step":
            a, b = _paired_steps(tp, pl, steps)
        else:
            order = (tp, pl) if r % 2 == 0 else (pl, tp)
            times = {fn: _window(fn, steps) for fn in order}
            a, b = times[tp], times[pl]
        t_tp.append(a)
        t_pl.append(b)
        ratios.append(a / b)
    ratio = statistics.median(ratios)
    best = min(t_tp) / min(t_pl)
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(f"{name:9s} {precision:5s} torchport/plain = {ratio:.4f}x median of {rounds} paired rounds "
          f"(best windows {best:.4f}x; {steps} steps/round, {mode}-interleaved, plain {min(t_pl) * 1e3:.2f} ms/step; "
          f"target <= {TARGET_RATIO:.2f}x)  {verdict}")
    return ratio


def api_overhead_us(n: int = 5000) -> dict[str, float]:
    """Host cost per call of the runtime API vs the plain-torch equivalent, in microseconds (no compute)."""
    import timeit

    target = torchport.current()
    device = target.device
    batch = (torch.zeros(8, 4), torch.zeros(8, dtype=torch.long))  # host tensors, as a loader yields them
    amp = torchport.Amp(amp_precision("amp", target))
    dtype = amp.dtype

    def tp_autocast():
        with amp.autocast():
            pass

    def plain_autocast():
        with torch.autocast(device.type, dtype=dtype):
            pass

    def per_call(fn) -> float:
        return min(timeit.repeat(fn, number=n, repeat=3)) / n * 1e6

    return {
        "to_device(batch)": per_call(lambda: torchport.to_device(batch)),
        "to_device(batch, device)": per_call(lambda: torchport.to_device(batch, device)),
        "plain .to(device) x2": per_call(lambda: (batch[0].to(device), batch[1].to(device))),
        "Amp.autocast()": per_call(tp_autocast),
        "torch.autocast()": per_call(plain_autocast),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="fp32,amp", help="comma list of fp32, amp, fp16, bf16")
    parser.add_argument("--workloads", default="mlp,resnet18")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=0, help="steps per window (default: mlp 50, resnet18 5)")
    parser.add_argument("--interleave", choices=("step", "window"), default="step",
                        help="pair single steps (robust on a noisy host; exposes all host overhead, as every step "
                             "is synchronised) or whole windows (keeps asynchronous execution)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: leave torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = torchport.current()
    print(f"device {target} ({target.backend.label}), torch {torch.__version__}, {torch.get_num_threads()} threads")
    worst = 0.0
    for prec_label in args.precision.split(","):
        precision = amp_precision(prec_label, target)
        for name in args.workloads.split(","):
            steps = args.steps or (50 if name == "mlp" else 5)
            worst = max(worst, measure(name, precision, args.rounds, steps, args.interleave))
    print(f"worst ratio {worst:.4f}x (target <= {TARGET_RATIO:.2f}x)")
    costs = api_overhead_us()
    print("host cost per call (us): " + ", ".join(f"{k} {v:.1f}" for k, v in costs.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
