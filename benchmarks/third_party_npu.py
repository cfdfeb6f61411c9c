#!/usr/bin/env python
"""Third-party libraries, unchanged, on the emulated NPU: a table of what ran, where, and whether it agrees.

Each job runs in its own interpreter with ``TORCHPORT_EMULATE=npu`` (nothing of torchport is imported
by the job) through a small wrapper that runs the library's own entry point and then prints the peak
npu memory -- proof that the work ran on the npu, not silently on the CPU:

* ``accelerate test`` (the CLI; it trains on CPU and on the device and compares the weights), and
  accelerate's ``test_script`` run in-process for the peak memory;
* a transformers ``Trainer`` on a tiny Llama built from a config (fp32 and fp16), compared with the
  same run on the CPU (first-step loss);
* accelerate's ``examples/cv_example.py --mixed_precision fp16`` and timm's ``train.py --device npu``
  on generated JPEGs -- these two scripts are not in the pip packages: pass ``--accelerate-repo`` /
  ``--timm-repo`` (checkouts or bare mirrors of github.com/huggingface/accelerate and
  github.com/huggingface/pytorch-image-models); they are extracted at the pinned commits with
  ``git show`` into a temporary directory. cv_example asks for pretrained ``resnet50d`` weights: the
  run points ``HF_HOME`` at a temporary hub cache holding randomly initialised weights (no network).

usage: python benchmarks/third_party_npu.py [--accelerate-repo DIR] [--timm-repo DIR] [--only NAME ...]
Prints a markdown table; ``--json FILE`` writes the rows. Exit 0 when every job that ran passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ACCELERATE_COMMIT = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
TIMM_COMMIT = "aa4b5850c1543fa488abf260f18390eda46cf85d"

#: runs argv[1:] as the library would (a script path or -m module), then reports the npu's peak memory
WRAPPER = textwrap.dedent("""
    import json, runpy, sys, atexit
    import torch

    def _report():
        peaks = [torch.npu.max_memory_allocated(i) for i in range(torch.npu.device_count())]
        print("TORCHPORT_PEAK " + json.dumps(peaks), flush=True)

    atexit.register(_report)
    target, sys.argv = sys.argv[1], sys.argv[1:]
    if target == "-m":
        sys.argv = sys.argv[1:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")
""")

TRAINER = textwrap.dedent("""
    import json, sys, tempfile
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    device, precision = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(1)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 128, (32, 16), generator=gen)]
    losses, dtypes = [], set()
    model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o: dtypes.add(str(o.dtype)))

    class Record(Trainer):
        def training_step(self, *a, **k):
            loss = super().training_step(*a, **k)
            losses.append(float(loss))
            return loss

    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=4, per_device_train_batch_size=8,
                             learning_rate=1e-3, fp16=precision == "fp16", use_cpu=device == "cpu",
                             report_to=[], save_strategy="no", logging_steps=1, seed=0, data_seed=0)
    trainer = Record(model=model, args=args, train_dataset=data)
    trainer.train()
    print("TORCHPORT_RESULT " + json.dumps({"device": str(next(model.parameters()).device), "losses": losses,
                                            "linear_out_dtypes": sorted(dtypes)}))
""")


def _run(cmd: list, env: dict, cwd: Path, timeout: int) -> tuple[int, str, float]:
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {timeout} s\n{exc.stdout or ''}", time.monotonic() - start


def _tagged(out: str, tag: str):
    for line in reversed(out.splitlines()):
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    return None


def _last_error(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "AssertionError" in ln] or [ln for ln in lines if "Error" in ln or "error:" in ln]
    return (errs[-1] if errs else (lines[-1] if lines else ""))[:160]


def _jpegs(root: Path, names: list, size: int = 64) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(root / name, quality=90)


def _git_show(repo: Path, commit: str, path: str, dest: Path) -> Path:
    data = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, check=True).stdout
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return dest


def _fake_hub_weights(hf_home: Path, model_name: str, hub_id: str) -> None:
    """A hub cache entry with randomly initialised weights, so ``pretrained=True`` loads offline."""
    import timm
    from safetensors.torch import save_file

    snap = hf_home / "hub" / f"models--{hub_id.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True, exist_ok=True)
    (snap.parents[1] / "refs").mkdir(exist_ok=True)
    (snap.parents[1] / "refs" / "main").write_text("0" * 40)
    model = timm.create_model(model_name, pretrained=False)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(snap / "model.safetensors"))
    (snap / "config.json").write_text(json.dumps({"architecture": model_name, "num_classes": 1000}))


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--accelerate-repo", type=Path, help="checkout/mirror of huggingface/accelerate (cv_example)")
    ap.add_argument("--timm-repo", type=Path, help="checkout/mirror of huggingface/pytorch-image-models (train.py)")
    ap.add_argument("--only", action="append", help="run only these jobs (accelerate-test, trainer, cv_example, timm)")
    ap.add_argument("--json", type=Path, help="write the rows as JSON")
    ap.add_argument("--timeout", type=int, default=1200)
    args = ap.parse_args(argv)
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory(prefix="third_party_npu.") as tmp_s:
        tmp = Path(tmp_s)
        wrapper = tmp / "wrap.py"
        wrapper.write_text(WRAPPER)
        env = dict(os.environ, TORCHPORT_EMULATE="npu", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"),
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp / "hf"),
                   ACCELERATE_CONFIG_FILE=str(tmp / "no_config.yaml"),
                   PATH=os.pathsep.join([str(Path(py).parent), os.environ.get("PATH", "")]))  # accelerate-launch

        def want(name: str) -> bool:
            return not args.only or name in args.only

        def row(name: str, cmd: list, cwd: Path = tmp, check=None, agree="n/a", jenv=None) -> None:
            rc, out, secs = _run(cmd, jenv or env, cwd, args.timeout)
            peak = _tagged(out, "TORCHPORT_PEAK")
            extra = check(out) if check and rc == 0 else None
            ok = rc == 0 and (peak is None or max(peak) > 0) and (extra is None or extra[0])
            rows.append({"job": name, "ok": ok, "rc": rc, "seconds": round(secs, 1),
                         "peak_npu_bytes": max(peak) if peak else None,
                         "agrees_with_cpu": (extra[1] if extra else agree if rc == 0 else "no (see note)"),
                         "note": "" if ok else _last_error(out)})

        if want("accelerate-test"):
            row("accelerate test (CLI)", [str(Path(py).with_name("accelerate")), "test"],
                check=lambda out: (("Test is a success" in out) or ("success" in out.lower()),
                                   "yes (its own CPU-vs-device weight check)"))
            import accelerate.test_utils.scripts.test_script as ts

            row("accelerate test_script (in-process)", [py, str(wrapper), ts.__file__],
                agree="yes (its own CPU-vs-device weight check)")
        if want("trainer"):
            (tmp / "trainer.py").write_text(TRAINER)
            cpu = _run([py, str(wrapper), str(tmp / "trainer.py"), "cpu", "fp32"], env, tmp, args.timeout)
            cpu_res = _tagged(cpu[1], "TORCHPORT_RESULT")
            for precision in ("fp32", "fp16"):
                def check(out: str, precision=precision):
                    res = _tagged(out, "TORCHPORT_RESULT")
                    if not res or not cpu_res:
                        return False, "no result"
                    diff = abs(res["losses"][0] - cpu_res["losses"][0])
                    tol = 1e-4 if precision == "fp32" else 5e-2
                    want = "torch.float16" if precision == "fp16" else "torch.float32"
                    ok = res["device"].startswith("npu") and diff <= tol and res["linear_out_dtypes"] == [want]
                    return ok, (f"first loss abs(npu - cpu fp32) = {diff:.2e}; "
                                f"Linear outputs {'/'.join(res['linear_out_dtypes'])}")

                row(f"transformers Trainer, tiny Llama, {precision}",
                    [py, str(wrapper), str(tmp / "trainer.py"), "npu", precision], check=check)
        if want("cv_example") and args.accelerate_repo:
            script = _git_show(args.accelerate_repo, ACCELERATE_COMMIT, "examples/cv_example.py", tmp / "cv_example.py")
            _jpegs(tmp / "pets", [f"{cls}_{i}.jpg" for cls in ("cat", "dog") for i in range(8)], size=96)
            _fake_hub_weights(tmp / "hf", "resnet50d", "timm/resnet50d.ra2_in1k")
            row("accelerate cv_example --mixed_precision fp16",
                [py, str(wrapper), str(script), "--data_dir", str(tmp / "pets"), "--mixed_precision", "fp16"])
        if want("timm") and args.timm_repo:
            script = _git_show(args.timm_repo, TIMM_COMMIT, "train.py", tmp / "timm_train.py")
            for split in ("train", "validation"):
                for cls in ("a", "b"):
                    _jpegs(tmp / "imgs" / split / cls, [f"{i}.jpg" for i in range(8)])
            row("timm train.py --device npu (resnet18, generated JPEGs)",
                [py, str(wrapper), str(script), "--data-dir", str(tmp / "imgs"), "--model", "resnet18",
                 "--num-classes", "2", "--input-size", "3", "64", "64", "-b", "4", "--epochs", "1",
                 "--device", "npu", "--workers", "0", "--log-interval", "1", "--output", str(tmp / "out")])
    lines = ["| job | ok | exit | s | peak npu memory | agrees with CPU | note |", "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        peak = ("-" if r["peak_npu_bytes"] is None else f"{r['peak_npu_bytes'] / 2**20:.1f} MiB"
                if r["peak_npu_bytes"] >= 2**20 else f"{r['peak_npu_bytes'] / 1024:.1f} KiB")
        lines.append(f"| {r['job']} | {'yes' if r['ok'] else 'NO'} | {r['rc']} | {r['seconds']} | {peak} | "
                     f"{r['agrees_with_cpu']} | {r['note'].replace('|', '/')} |")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
