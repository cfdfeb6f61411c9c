"""Why resnet18's compiled losses leave eager's: rounding amplification or a real difference? (issue 37)

resnet18 (torchvision, 10 classes), batch 8, 64 px, SGD, 7 steps on the CPU, seeded. Compares, after step 1
(gradients, parameters after the update, BatchNorm running statistics, num_batches_tracked) and per step
(|loss diff|), eager against: eager with the weights x (1 + 1e-7 N(0, 1)) (rounding-sized noise), eager on 1
thread instead of 2 (another reduction order), torch.compile (Inductor) -- at lr 1e-2 and 1e-3, in float32 and
(``--part f64``) float64. If the compiled difference is rounding, it is of the size of the eager-vs-eager ones
in float32 and vanishes (to ~1e-15) in float64.

usage: .venv/bin/python benchmarks/bench_compile_drift.py [--part f32|f64]
"""
import copy, sys, time

import torch
import torch.nn.functional as F
import torchvision

torch.manual_seed(0)
STEPS = 7
base = torchvision.models.resnet18(num_classes=10)
data = [(torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))) for _ in range(STEPS)]
init = copy.deepcopy(base.state_dict())
def log(*a): print(*a, flush=True)

def run(model, fwd, lr, dtype=torch.float32, perturb=0.0, threads=None):
    sd = {k: (v.to(dtype) if v.is_floating_point() else v.clone()) for k, v in init.items()}
    if perturb:
        g = torch.Generator().manual_seed(1)
        for k, v in sd.items():
            if v.is_floating_point() and "running" not in k:
                sd[k] = v * (1 + perturb * torch.randn(v.shape, generator=g, dtype=dtype))
    model.load_state_dict(sd)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    old = torch.get_num_threads()
    if threads: torch.set_num_threads(threads)
    losses, snap = [], None
    for i, (x, y) in enumerate(data):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(fwd(x.to(dtype)), y)
        loss.backward()
        if i == 0:
            snap = {"grad": {n: p.grad.clone() for n, p in model.named_parameters()},
                    "buf": {n: b.clone() for n, b in model.named_buffers()}}
        opt.step()
        if i == 0:
            snap["param"] = {n: p.detach().clone() for n, p in model.named_parameters()}
        losses.append(loss.item())
    torch.set_num_threads(old)
    return losses, snap

from bench_compile import _rel as rel   # noqa: E402 - one relative difference for both compile benchmarks
def compare(tag, ra, rb):
    la, sa = ra; lb, sb = rb
    g = max(rel(sa["grad"][n], sb["grad"][n]) for n in sa["grad"])
    p = max(rel(sa["param"][n], sb["param"][n]) for n in sa["param"])
    bufs = {n: rel(sa["buf"][n].float(), sb["buf"][n].float()) for n in sa["buf"] if "running" in n}
    nbt = all(torch.equal(sa["buf"][n], sb["buf"][n]) for n in sa["buf"] if "num_batches" in n)
    nbt_v = sorted({int(v) for n, v in sa["buf"].items() if "num_batches" in n})
    log(f"{tag}: step1 max rel grad diff {g:.2e}; max rel param diff after step1 {p:.2e}; "
        f"max rel running stat diff {max(bufs.values()):.2e}; num_batches_tracked equal {nbt} values {nbt_v}")
    log(f"{tag}: |loss diff| per step " + " ".join(f"{abs(a-b):.1e}" for a, b in zip(la, lb)))


PART = sys.argv[sys.argv.index("--part") + 1] if "--part" in sys.argv else "f32"
if PART == "f32":
    m = base; t0 = time.time()
    E = run(m, m, 0.01); log("E losses", " ".join(f"{v:.6f}" for v in E[0]), f"{time.time()-t0:.0f}s")
    P = run(m, m, 0.01, perturb=1e-7); compare("eager vs eager(params*(1+1e-7*noise))", P, E)
    T1 = run(m, m, 0.01, threads=1); compare("eager 2 threads vs eager 1 thread", T1, E)
    E3 = run(m, m, 0.001); P3 = run(m, m, 0.001, perturb=1e-7); compare("lr1e-3 eager vs perturbed eager", P3, E3)
    cm = copy.deepcopy(base); comp = torch.compile(cm)
    t0 = time.time(); C = run(cm, comp, 0.01); log(f"compiled run {time.time()-t0:.0f}s; training={cm.training}")
    compare("lr1e-2 compiled vs eager", C, E)
    C3 = run(cm, comp, 0.001); compare("lr1e-3 compiled vs eager", C3, E3)
else:
    m = base.double(); init = copy.deepcopy(m.state_dict())
    E64 = run(m, m, 0.01, torch.float64); log("E64 losses", " ".join(f"{v:.6f}" for v in E64[0]))
    T64 = run(m, m, 0.01, torch.float64, threads=1); compare("f64 eager 2 threads vs 1 thread", T64, E64)
    P64 = run(m, m, 0.01, torch.float64, perturb=1e-7); compare("f64 eager vs perturbed(1e-7) eager", P64, E64)
    cm = copy.deepcopy(m); comp = torch.compile(cm)
    t0 = time.time(); C64 = run(cm, comp, 0.01, torch.float64); log(f"f64 compiled {time.time()-t0:.0f}s")
    compare("f64 compiled vs eager", C64, E64)
