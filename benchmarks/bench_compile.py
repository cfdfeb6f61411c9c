"""torch.compile vs eager, on the CPU and on the emulated npu: loss trajectories, step time, max difference.

For each device (cpu, then npu with the emulator installed in this process), each backend and each model
(``tinycnn`` from torchport.models; ``resnet18`` from torchvision, 10 classes; ``nanogpt``, a tiny GPT-style
transformer written here: token + position embedding, pre-LN causal self-attention blocks, tied LM head): two
copies with the same weights, one eager and one ``torch.compile(model, backend=...)``, train on the same
batches with SGD. The first compiled step (compile time) is reported apart as warm-up ("compile"), and the
median step time of the remaining steps is compared (ratio compiled / eager, measured in the same run,
interleaved). Max diff: the largest absolute difference of the losses over the steps (the trajectories are
printed) and of the parameters after them (forward and backward both feed it).

Two checks make ``ok``, because a training trajectory amplifies float32 rounding (resnet18 with BatchNorm on
2x2 maps at batch 8 does so ~1e4-fold in 6 SGD steps; eager itself moves that far when its thread count
changes):
* step 1, tight: the gradients, the parameters after the update and the buffers (BatchNorm running
  statistics; integer buffers such as ``num_batches_tracked`` exactly) of compiled vs eager, relative
  (``||a - b|| / ||b||``, the worst tensor): gradients (and parameters) and buffers each within
  max(``--step1-tol``, ``--floor-factor`` x the same diff of the noisy copy below after its step 1) -- a BatchNorm
  over 4 values a channel (resnet18 at 32 px, batch 4) makes even step-1 gradients rounding-sensitive at 1e-4;
* the trajectory, against the rounding floor: a third copy, eager with its initial weights multiplied by
  ``1 + 1e-7 * N(0, 1)`` (float32 rounding-sized noise), gives the max |loss diff| that rounding alone
  causes; compiled is within when its max |loss diff| <= max(``--tol``, ``--floor-factor`` x that floor).

usage: .venv/bin/python benchmarks/bench_compile.py [--steps 6] [--batch 8] [--size 32]
                                                    [--models tinycnn,resnet18,nanogpt] [--tol 1e-4] [--lr 0.01]
                                                    [--step1-tol 1e-4] [--floor-factor 10]
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
import torch.nn as nn
import torch.nn.functional as F


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A nanoGPT-style language model, small enough for a CPU benchmark."""

    def __init__(self, vocab: int = 64, block: int = 32, dim: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.Sequential(*[_Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.blocks(x)))


def _model_and_data(name: str, steps: int, batch: int, size: int):
    """(model, batches, loss_fn) for ``name``, seeded."""
    torch.manual_seed(0)
    if name == "tinycnn":
        from torchport.models import tinycnn

        model = tinycnn(10)
    elif name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
    elif name == "nanogpt":
        model = TinyGPT()
        data = [torch.randint(0, 64, (batch, 33)) for _ in range(steps + 1)]
        return model, [(d[:, :-1], d[:, 1:]) for d in data], \
            lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    else:
        raise SystemExit(f"error: unknown model {name!r}: use tinycnn, resnet18 or nanogpt")
    data = [(torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))) for _ in range(steps + 1)]
    return model, data, F.cross_entropy


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item() if b.norm() > 0 else a.norm().item()


def _state_after_step1(model: nn.Module) -> dict:
    return {"grad": {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None},
            "param": {n: p.detach().clone() for n, p in model.named_parameters()},
            "buffer": {n: b.detach().clone() for n, b in model.named_buffers()}}


def _step1_diffs(c: dict, e: dict) -> dict:
    """Worst relative difference of compiled vs eager after step 1, per kind; integer buffers must be equal."""
    out = {}
    for kind in ("grad", "param"):
        assert c[kind].keys() == e[kind].keys(), f"step 1: compiled and eager {kind}s differ in names"
        out[kind] = max((_rel(c[kind][n], e[kind][n]) for n in e[kind]), default=0.0)
    floats = [n for n, b in e["buffer"].items() if b.is_floating_point()]
    out["buffer"] = max((_rel(c["buffer"][n], e["buffer"][n]) for n in floats), default=0.0)
    out["int_buffers_equal"] = all(torch.equal(c["buffer"][n].cpu(), e["buffer"][n].cpu())
                                   for n, b in e["buffer"].items() if not b.is_floating_point())
    return out


def _measure(device: str, backend: str, model_name: str, steps: int, batch: int, size: int, tol: float,
             lr: float, step1_tol: float = 1e-4, floor_factor: float = 10.0) -> dict:
    torch._dynamo.reset()
    model, data, loss_fn = _model_and_data(model_name, steps, batch, size)
    eager = model.to(device)
    comp_model = copy.deepcopy(eager)
    noisy = copy.deepcopy(eager)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in noisy.parameters():
            p.mul_(1 + 1e-7 * torch.randn(p.shape, generator=gen).to(device))
    compiled = torch.compile(comp_model, backend=backend)
    opt_e = torch.optim.SGD(eager.parameters(), lr=lr)
    opt_c = torch.optim.SGD(comp_model.parameters(), lr=lr)
    opt_n = torch.optim.SGD(noisy.parameters(), lr=lr)
    data = [(x.to(device), y.to(device)) for x, y in data]

    def step(model, opt, x, y) -> tuple[float, float]:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()
        return time.perf_counter() - t0, value

    times_e, times_c, losses_e, losses_c = [], [], [], []
    warm_c, lc = step(compiled, opt_c, *data[0])
    warm_e, le = step(eager, opt_e, *data[0])
    step1 = _step1_diffs(_state_after_step1(comp_model), _state_after_step1(eager))
    losses_n = [step(noisy, opt_n, *data[0])[1]]
    step1_floor = _step1_diffs(_state_after_step1(noisy), _state_after_step1(eager))
    losses_e.append(le)
    losses_c.append(lc)
    for x, y in data[1:]:
        tc, lc = step(compiled, opt_c, x, y)
        te, le = step(eager, opt_e, x, y)
        times_c.append(tc)
        times_e.append(te)
        losses_e.append(le)
        losses_c.append(lc)
    losses_n += [step(noisy, opt_n, x, y)[1] for x, y in data[1:]]
    loss_diff = max(abs(a - b) for a, b in zip(losses_e, losses_c))
    floor = max(abs(a - b) for a, b in zip(losses_e, losses_n))
    traj_tol = max(tol, floor_factor * floor)
    # the noisy copy's step-1 gradient and buffer diffs are the rounding floor there; its parameters differ by
    # the noise itself, so the parameters take the gradients' limit (p - lr g: a zero-initialised parameter,
    # a BatchNorm bias, differs after step 1 exactly as relatively as its gradient)
    grad_lim = max(step1_tol, floor_factor * step1_floor["grad"])
    step1_lim = {"grad": grad_lim, "param": grad_lim,
                 "buffer": max(step1_tol, floor_factor * step1_floor["buffer"])}
    step1_ok = all(step1[k] <= step1_lim[k] for k in step1_lim) and step1["int_buffers_equal"]
    param_diff = max((a - b).abs().max().item() for a, b in zip(eager.parameters(), comp_model.parameters()))
    med_e, med_c = statistics.median(times_e), statistics.median(times_c)
    return {"model": model_name, "device": device, "backend": backend, "compile_s": round(warm_c - warm_e, 2),
            "first_compiled_step_s": round(warm_c, 2),
            "eager_step_ms": round(med_e * 1e3, 2), "compiled_step_ms": round(med_c * 1e3, 2),
            "ratio_compiled_over_eager": round(med_c / med_e, 3), "max_loss_diff": loss_diff,
            "max_param_diff": param_diff, "tol": tol,
            "step1_rel_diff": step1, "step1_rel_diff_rounding_floor": step1_floor, "step1_tol": step1_lim,
            "step1_ok": step1_ok,
            "rounding_floor_loss_diff": floor, "trajectory_tol": traj_tol, "trajectory_ok": loss_diff <= traj_tol,
            "ok": step1_ok and loss_diff <= traj_tol,
            "losses_eager": [round(v, 6) for v in losses_e], "losses_compiled": [round(v, 6) for v in losses_c],
            "losses_eager_noisy": [round(v, 6) for v in losses_n],
            "steps": steps + 1, "batch": batch, "size": size, "lr": lr}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="timed steps after the warm-up step")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=32, help="image side for tinycnn / resnet18")
    ap.add_argument("--models", default="tinycnn")
    ap.add_argument("--lr", type=float, default=0.01, help="SGD learning rate (small: a chaotic trajectory "
                    "amplifies rounding differences)")
    ap.add_argument("--tol", type=float, default=1e-4, help="max |loss diff| eager vs compiled that is always ok")
    ap.add_argument("--step1-tol", type=float, default=1e-4, help="max relative diff of step-1 grads/params/buffers")
    ap.add_argument("--floor-factor", type=float, default=10.0, help="trajectory tolerance: this many times the "
                    "rounding floor (eager vs eager with 1e-7-relative weight noise)")
    ap.add_argument("--backends", default="inductor,aot_eager")
    ap.add_argument("--devices", default="cpu,npu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    for device in args.devices.split(","):
        if device == "npu":
            import torchport.emulate as emulate

            emulate.install()
        for model_name in args.models.split(","):
            for backend in args.backends.split(","):
                row = _measure(device, backend, model_name, args.steps, args.batch, args.size, args.tol,
                               args.lr, args.step1_tol, args.floor_factor)
                rows.append(row)
                print(f"{model_name:8} {device:4} {backend:10} compile {row['compile_s']:7.2f} s   "
                      f"eager {row['eager_step_ms']:8.2f} ms  compiled {row['compiled_step_ms']:8.2f} ms  "
                      f"ratio {row['ratio_compiled_over_eager']:.3f}   max |loss diff| {row['max_loss_diff']:.2e} "
                      f"(rounding floor {row['rounding_floor_loss_diff']:.2e}, tol {row['trajectory_tol']:.2e}: "
                      f"{'ok' if row['trajectory_ok'] else 'OVER'})  "
                      f"max |param diff| {row['max_param_diff']:.2e}", flush=True)
                d = row["step1_rel_diff"]
                f, lim = row["step1_rel_diff_rounding_floor"], row["step1_tol"]
                print(f"    step 1 rel diff: grads {d['grad']:.1e} (floor {f['grad']:.1e}, tol {lim['grad']:.1e}) "
                      f"params {d['param']:.1e} (tol {lim['param']:.1e}) buffers {d['buffer']:.1e} (floor "
                      f"{f['buffer']:.1e}, tol {lim['buffer']:.1e}) int buffers equal {d['int_buffers_equal']}: "
                      f"{'ok' if row['step1_ok'] else 'OVER'}", flush=True)
                print(f"    losses eager    {' '.join(f'{v:.6f}' for v in row['losses_eager'])}", flush=True)
                print(f"    losses compiled {' '.join(f'{v:.6f}' for v in row['losses_compiled'])}", flush=True)
                print(f"    losses noisy    {' '.join(f'{v:.6f}' for v in row['losses_eager_noisy'])}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
