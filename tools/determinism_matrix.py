"""The determinism matrix of ``torchport train``: loader settings x thread counts, with final-weight hashes.

Each case trains torchport's tinycnn (16 px, batch 8, one 12-step epoch of a 4-class synthetic set, fp32,
AdamW, cosine schedule, seed 0) in this process and records every step's loss and the SHA-256 of the final
weights. Cases: no workers (the reference), 2 workers, pinned host memory on the emulated npu (its fp32 is
the CPU's bits), pinned memory off on the emulated npu, SIGTERM at step 6 then ``--resume auto``, a
busy process on every core beside the run. Each case runs at each thread count (``--threads 1,2``); a case
is compared with the reference of its own thread count, and the references of different thread counts are
compared with each other -- that is the row that changes.

The CI test (tests/train/test_determinism_guard.py) runs the 1-thread column; this prints the whole table
for docs/train.md.

Usage::

    python tools/determinism_matrix.py                 # threads 1,2
    python tools/determinism_matrix.py --threads 1,2,4 --json matrix.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def weights_sha(checkpoint: str) -> str:
    import torch

    state = torch.load(checkpoint, weights_only=True)["model"]
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]

    import torch

    import torchport.emulate

    torchport.emulate.prepare()   # before any backward: the emulated npu's autograd queues
    from torchport.backends import registry
    from torchport.data.synth import make_dataset
    from torchport.emulate import emulated
    from torchport.runtime import device as runtime_device
    from torchport.train import TrainConfig, read_jsonl, train
    from torchport.train.stop import Terminated

    warnings.simplefilter("ignore", UserWarning)
    tmp = Path(tempfile.mkdtemp(prefix="torchport-determinism-"))
    data = tmp / "shapes"
    make_dataset(data, classes=4, train_per_class=24, val_per_class=8, size=32)
    count = [0]

    def cfg(**kw) -> TrainConfig:
        count[0] += 1
        base = dict(data=str(data), model="tinycnn", image_size=16, batch_size=8, lr=0.02, epochs=1, workers=0,
                    warmup_epochs=0, precision="fp32", log_every=1, checkpoint_every=4, progress="none",
                    device="cpu", run_dir=str(tmp / f"run{count[0]}"))
        return TrainConfig(**{**base, **kw})

    def outcome(result, c) -> dict:
        losses = {r["step"]: r["loss"] for r in read_jsonl(Path(c.run_dir) / "metrics.jsonl") if r.get("kind") == "step"}
        return {"losses": [losses[s] for s in sorted(losses)], "sha": weights_sha(result.last_checkpoint)}

    def plain(**kw):
        c = cfg(**kw)
        return outcome(train(c), c)

    def resumed():
        c = cfg(workers=2)

        def stop_at_6(**kw):
            if kw["step"] == 6:
                os.kill(os.getpid(), signal.SIGTERM)
        try:
            train(c, callbacks=[stop_at_6])
        except Terminated:
            pass
        return outcome(train(dataclasses.replace(c, resume="auto")), c)

    def hog():
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        try:
            return plain()
        finally:
            for p in procs:
                p.kill()
                p.wait()

    def npu(pin: bool):
        with emulated():
            spec = registry.get("npu")
            if not pin:
                registry.register(dataclasses.replace(spec, pin_memory=False), replace=True)
            runtime_device.reset_selection()
            try:
                return plain(device="npu", workers=2)
            finally:
                registry.register(spec, replace=True)
                runtime_device.reset_selection()

    cases = {"0 workers (reference)": lambda: plain(), "2 workers": lambda: plain(workers=2),
             "npu, pinned memory on, 2 workers": lambda: npu(True),
             "npu, pinned memory off, 2 workers": lambda: npu(False),
             "SIGTERM at step 6, resumed": resumed, f"{os.cpu_count()} busy processes beside it": hog}
    rows = []
    refs = {}
    for n in threads:
        torch.set_num_threads(n)
        for name, fn in cases.items():
            t0 = time.perf_counter()
            out = fn()
            out.update(case=name, threads=n, seconds=round(time.perf_counter() - t0, 1))
            if name.startswith("0 workers"):
                refs[n] = out
            ref = refs[n]
            out["same_as_ref"] = out["losses"] == ref["losses"] and out["sha"] == ref["sha"]
            rows.append(out)
            print(f"  {name}, {n} thread(s): {out['sha'][:12]} {'=' if out['same_as_ref'] else '!='} reference",
                  file=sys.stderr, flush=True)
    cap = torch.backends.cpu.get_cpu_capability()
    print(f"\ntorch {torch.__version__}, {cap} kernels, {os.cpu_count()} cores; tinycnn 16 px, 12 steps, fp32, seed 0\n")
    print("| case | threads | final loss | final-weight SHA-256 (first 16) | = reference of its thread count |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['threads']} | {r['losses'][-1]:.7f} | `{r['sha'][:16]}` | "
              f"{'yes' if r['same_as_ref'] else '**no**'} |")
    if len(refs) > 1:
        base = refs[threads[0]]
        for n in threads[1:]:
            r = refs[n]
            first = next((i + 1 for i, (a, b) in enumerate(zip(base["losses"], r["losses"])) if a != b), None)
            diff = max(abs(a - b) for a, b in zip(base["losses"], r["losses"]))
            print(f"\n{threads[0]} vs {n} threads: " + ("bit-identical" if first is None and base["sha"] == r["sha"]
                  else f"first differing step {first}, max loss difference {diff:.2e}, weights "
                       f"{'equal' if base['sha'] == r['sha'] else 'differ'}"))
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": torch.__version__, "capability": cap, "rows": rows}, indent=2))
    return 0 if all(r["same_as_ref"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
