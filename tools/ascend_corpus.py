#!/usr/bin/env python3
"""Real Ascend training scripts (ModelZoo-PyTorch, pinned) on the emulated NPU: do they step, is the loss finite?

Each recipe names a folder of https://github.com/Ascend/ModelZoo-PyTorch at the pinned commit, the training
script in it and the launch flags of its own ``test/train_*_1p.sh`` made tiny. The folder is extracted at run time
from a local bare mirror (``--mirrors``: ``owner+name/repo``, as the session's fetch tool leaves it) into a
temporary folder -- nothing of it is committed here -- and the script runs **unchanged** (no text patches: a
recipe that needs one says so in its ``note``) in a fresh interpreter under ``TORCHPORT_EMULATE=npu:2``, with
the equivalence probe of ``tools/migrate_corpus.py`` (``tools/equivalence_probe``): torchvision datasets
(``ImageFolder``, CIFAR) become small generated ones, the loss of every ``backward()`` is recorded per
optimizer step, and the script is stopped after ``--steps`` steps.

A CPU reference exists only where the script has a path that does not need the card: these scripts import
``torch_npu`` and place tensors on ``npu:N`` unconditionally, so for them the table says "NPU-only" (the
emulator computes fp32 as the CPU does, bit for bit, by default: tests/emulate/test_emu_fp32_identity.py).

usage: tools/ascend_corpus.py [--mirrors /work/.mirror] [--only NAME ...] [--steps 2] [--markdown FILE]

Exit code: 0 when every recipe that ran stepped with a finite loss, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import migrate_corpus as mc  # noqa: E402  (the probe's environment, result reader and mirror helpers)

REPO = "Ascend/ModelZoo-PyTorch"
COMMIT = "6a2804a358a5b18e3dac1ab902f41f88e240b00f"  # the commit tools/npu_op_scan.py scanned (issue 37)
_CLS = "PyTorch/built-in/cv/classification"


@dataclasses.dataclass
class Recipe:
    name: str
    folder: str  # under the repository root
    script: str  # relative to folder
    args: list
    family: str
    note: str = ""


_IMG = ["--epochs", "1"]
RECIPES = [
    Recipe("resnet50-apex", f"{_CLS}/ResNet50_for_PyTorch", "pytorch_resnet50_apex.py",
           ["--data", "data", "--npu", "0", "-j", "0", "-b", "4", "--lr", "0.2", "--warmup", "0",
            "--label-smoothing=0.1", "--epochs", "1", "--optimizer-batch-size", "4"], "resnet"),
    Recipe("resnet1001-apex", f"{_CLS}/ResNet1001_1202_for_PyTorch", "pytorch_resnet_apex.py",
           ["--arch", "resnet1001", "--data", "data", "--npu", "0", "-j", "0", "-b", "2", "--lr", "0.05", "-p", "100",
            "--warmup", "0", "--epochs", "1", "--optimizer-batch-size", "2"], "resnet"),
    Recipe("densenet121", f"{_CLS}/Densenet121_for_PyTorch", "main.py",
           ["--data", "data", "--workers", "0", "--arch", "densenet121", "--lr", "0.1", "--print-freq", "1", "--gpu", "0",
            "--batch-size", "2", "--epochs", "1", "--dist-backend", "hccl", "--stop-step-num", "3"], "densenet"),
    Recipe("mobilenetv1-apex", f"{_CLS}/MobileNetV1_ID0094_for_PyTorch", "main.py",
           ["--arch=mobilenet", "--data=data", "--batch_size=4", "--learning-rate=0.1", "--epochs=1",
            "--device_id=0", "--max_steps=3", "--loss-scale-value=1024", "--apex", "--apex-opt-level=O2",
            "--workers=0", "--print-freq=1"], "mobilenet"),
    Recipe("mobilenetv3-apex", f"{_CLS}/MobileNetV3-Large_ID1784_for_PyTorch", "main.py",
           ["--arch=mobilenet", "--data=data", "--batch_size=4", "--learning-rate=0.1", "--epochs=1",
            "--device_id=0", "--apex", "--apex-opt-level=O1", "--workers=0", "--print-freq=1", "--max_steps=3"],
           "mobilenet"),
    Recipe("googlenet-apex", f"{_CLS}/Googlenet_ID0447_for_PyTorch", "references/classification/train.py",
           ["--model", "googlenet", "--epochs", "1", "--data-path=data", "--batch-size=4", "--lr", "0.1",
            "--apex", "--apex-opt-level", "O1", "--loss_scale_value", "1024", "--seed", "1234", "--device_id=0",
            "--workers", "0", "--print-freq", "1", "--max_steps", "3"], "inception"),
    Recipe("densenet161-apex", f"{_CLS}/DenseNet161_ID0455_for_PyTorch", "references/classification/train.py",
           ["--model", "densenet161", "--epochs", "1", "--data-path=data", "--batch-size=2", "--workers", "0",
            "--lr", "0.1", "--apex", "--apex-opt-level", "O2", "--loss_scale_value", "dynamic", "--seed", "1234",
            "--device_id=0", "--print-freq", "1"], "densenet"),
    Recipe("efficientnet-b1-amp", f"{_CLS}/EfficientNet-B1_ID1713_for_PyTorch", "examples/imagenet/main.py",
           ["--data=data", "--arch=efficientnet-b1", "--batch-size=2", "--lr=0.1", "--epochs=1", "--amp", "--pm=O2",
            "--loss_scale=32", "--val_feq=10", "--stop-step-num=3", "--workers=0", "--npu=0"], "efficientnet"),
    Recipe("shufflenetv2", f"{_CLS}/Shufflenetv2_for_PyTorch", "8p_main_med.py",
           ["--data=data", "--seed=49", "--workers=0", "--lr=0.75", "--print-freq=1", "-ef=5",
            "--arch=shufflenet_v2_x1_0", "--world-size=1", "--batch-size=4", "--epochs=1", "--device-list=0",
            "--rank=0", "--dist-backend=hccl", "--amp"], "shufflenet"),
]

_CON = "PyTorch/contrib/cv/classification"


def _main(arch: str, *extra: str) -> list:
    """The flags of the contrib ``main.py`` family (pytorch/examples' ImageNet script, ported to the card)."""
    return ["data", "-a", arch, "--addr=127.0.0.1", "--seed=49", "--workers=0", "--learning-rate=0.01", "--mom=0.9",
            "--weight-decay=1.0e-04", "--print-freq=1", "--device=npu", "--gpu=0", "--dist-backend", "hccl",
            "--epochs=1", "--batch-size=4", *extra]


RECIPES += [
    Recipe("alexnet-amp", f"{_CON}/AlexNet_ID2663_for_PyTorch", "main.py", _main("alexnet", "--label-smoothing=0.1",
                                                                                 "--amp"), "alexnet"),
    Recipe("resnet18-amp", f"{_CON}/ResNet18_ID1593_for_PyTorch", "main.py", _main("resnet18", "--device_list=0",
                                                                                  "--amp"), "resnet"),
    Recipe("resnet34", f"{_CON}/ResNet34_ID1594_for_PyTorch", "main.py", _main("resnet34", "--stop-step-num=3",
                                                                              "--device_list=0"), "resnet"),
    Recipe("se-resnet50-amp", f"{_CON}/SE-ResNet-50", "main.py", _main("se_resnet50", "--rank=0", "--world-size=1",
                                                                        "--amp")[:1] + _main("x")[3:] +
           ["--rank=0", "--world-size=1", "--amp"], "senet"),
    Recipe("resnext50-amp", f"{_CON}/ResNeXt-50-32x4d_ID1624_for_PyTorch", "main.py",
           _main("x")[:1] + _main("x")[3:] + ["--rank=0", "--world-size=1", "--amp"], "resnext"),
    Recipe("dpn131-amp", f"{_CON}/DPN-131_for_PyTorch", "main.py",
           _main("x")[:1] + _main("x")[3:] + ["--dist-url=tcp://127.0.0.1:50001", "--world-size=1", "--amp"], "dpn"),
    Recipe("wideresnet50-amp", f"{_CON}/WideResNet50_2_ID1627_for_PyTorch", "main.py",
           _main("x")[:1] + _main("x")[3:] + ["--world-size=1", "--warm_up_epochs=0", "--loss-scale=dynamic", "--amp"],
           "wideresnet"),
    Recipe("res2net101-amp", f"{_CON}/Res2Net101_v1b", "main.py",
           _main("x")[:1] + _main("x")[3:] + ["--dist-url=tcp://127.0.0.1:50000", "--world-size=1", "--amp"],
           "res2net"),
    Recipe("vgg16-amp", f"{_CON}/Vgg16_ID1630_for_PyTorch", "main.py",
           ["--data=data", "--addr=127.0.0.1", "--seed=49", "--workers=0", "--learning-rate=0.01", "--print-freq=1",
            "--eval-freq=1", "--world-size", "1", "--batch-size", "2", "--device", "npu", "--epochs", "1", "--gpu=0",
            "--amp", "--opt-level", "O1", "--dist-backend", "hccl", "--loss-scale-value", "8", "--momentum", "0.9",
            "--device-list=0"],
           "vgg"),
    Recipe("squeezenet1_1-amp", f"{_CON}/SqueezeNet1_1", "main.py",
           ["--data", "data", "--npu", "0", "-a", "squeezenet1_1", "-b", "4", "-p", "1", "--lr", "0.01", "--epochs",
            "1", "-j", "0", "--amp", "--wd", "0.0001"], "squeezenet"),
    Recipe("googlenet-contrib-amp", f"{_CON}/GoogleNet_ID1623_for_PyTorch", "main.py",
           ["--data", "data", "--npu", "0", "-a", "googlenet", "-b", "4", "--lr", "0.01", "--epochs", "1", "-j", "0",
            "--amp", "--wd", "0.0001"], "inception"),
    Recipe("inceptionv3-amp", f"{_CON}/InceptionV3_ID1596_for_PyTorch", "main.py",
           ["--data", "data", "--gpu", "0", "-a", "inception_v3", "-b", "2", "--lr", "0.01", "--epochs", "1", "-j",
            "0", "--amp", "-p", "1", "--label-smoothing", "0.1", "--wd", "0.0002"], "inception"),
    Recipe("inceptionv4-amp", f"{_CON}/InceptionV4_ID1778_for_PyTorch", "train_1p.py",
           ["--npu", "0", "--amp", "--data", "data", "--seed=49", "--workers=0", "--learning-rate=0.01", "--mom=0.9",
            "--weight-decay=1.0e-04", "--print-freq=1", "--epochs=1", "--label-smoothing=0.1", "--batch-size=2"],
           "inception"),
    Recipe("inception-resnetv2-amp", f"{_CON}/InceptionResNetV2_ID1779_for_PyTorch", "train_1p.py",
           ["--data", "data", "--npu", "0", "--amp", "--seed=49", "--workers=0", "--learning-rate=0.01", "--mom=0.9",
            "--weight-decay=1.0e-04", "--print-freq=1", "--epochs=1", "--label-smoothing=0.1", "--batch-size=2"],
           "inception"),
    Recipe("mobilenet-contrib", f"{_CON}/MobileNet", "mobilenet.py",
           ["--data=data", "--batch_size=4", "--ngpu", "1", "--epochs=1", "-j", "0", "--lr=0.01", "--device_id=0"],
           "mobilenet"),
    Recipe("genet-amp", f"{_CON}/GENet_for_Pytorch", "train.py",
           ["--DataPath=data", "--addr=127.0.0.1", "--seed=49", "--workers=0", "--world_size=1", "--print_freq=1",
            "--device=npu", "--gpu=0", "--no_epochs=1", "--loss_scale=32", "--amp", "--batch_size=4"], "genet"),
    Recipe("shufflenetv2plus-amp", f"{_CON}/ShuffleNetV2Plus_ID1626_for_PyTorch", "train.py",
           ["--data=data", "--model-size", "Small", "--addr=127.0.0.1", "--batch-size=4", "--epochs=1", "--workers=0",
            "--print-freq=1", "--eval-freq=5", "--dist-url=tcp://127.0.0.1:50000", "--dist-backend=hccl",
            "--world-size=1", "--rank=0", "--amp", "--device-list=0", "--gpu=0", "--benchmark", "0"], "shufflenet"),
    Recipe("spnasnet100-amp", f"{_CON}/SPNASNet_100_for_PyTorch", "train_1p.py",
           ["data", "--model", "spnasnet_100", "--sched", "cosine", "--epochs", "1", "--warmup-epochs", "0", "--lr",
            "0.4", "--amp", "-j", "0", "--batch-size", "4"], "nas"),
    Recipe("mobilenetv3-timm-amp", f"{_CON}/MobileNetV3_large_100_for_PyTorch", "train_1p.py",
           ["data", "--model", "mobilenetv3_large_100", "--opt", "npufusedsgd", "--weight-decay", "4e-5",
            "--momentum", "0.9", "--sched", "cosine", "--loss-scale", "64", "--amp", "--lr", "0.1", "--epochs=1",
            "-j", "0", "--batch-size", "4"], "mobilenet"),
]


@dataclasses.dataclass
class Result:
    recipe: Recipe
    rc: int
    steps: int
    losses: list
    error: str
    seconds: float

    @property
    def finite(self) -> bool:
        return bool(self.losses) and all(math.isfinite(x) for x in self.losses)

    @property
    def status(self) -> str:
        if self.steps and self.finite:
            return "trains"
        if self.steps:
            return "steps, loss not finite"
        return "fails"


def extract(git_dir: Path, folder: str, dest: Path) -> None:
    """``git archive`` ``folder`` at the pinned commit into ``dest`` (the folder's content at its top)."""
    files = mc._present(git_dir, COMMIT, folder)
    data = subprocess.run(["git", "--git-dir", str(git_dir), "archive", COMMIT, "--", *files],
                          capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest), "--strip-components", str(len(Path(folder).parts))],
                   input=data, check=True)


def _image_folder(root: Path, n: int, seed: int) -> None:
    """``root/{train,val}/<class>/*.jpg``: generated images on disk, for loaders the probe does not replace
    (timm's dataset parser reads the folder itself); torchvision's ImageFolder is replaced by the probe."""
    import numpy as np
    from PIL import Image

    rs = np.random.RandomState(seed)
    for split in ("train", "val"):
        for c in range(2):
            d = root / split / f"n{c:08d}"
            d.mkdir(parents=True, exist_ok=True)
            for i in range(max(1, n // 2)):
                Image.fromarray(rs.randint(0, 256, (64, 64, 3), dtype=np.uint8)).save(d / f"{i}.jpg")


def run(recipe: Recipe, git_dir: Path, steps: int, timeout: float, seed: int = 0, fake_size: int = 64) -> Result:
    with tempfile.TemporaryDirectory(prefix=f"ascend-{recipe.name}-") as tmp:
        root = Path(tmp) / "recipe"
        root.mkdir()
        extract(git_dir, recipe.folder, root)
        out = Path(tmp) / "probe"
        out.mkdir()
        env = mc._env(out, steps, "npu", seed, fake_data=True, fake_size=fake_size)
        env["TORCHPORT_EMULATE"] = "npu"  # one card: the 1p launch
        script = root / recipe.script
        _image_folder(script.parent / "data", fake_size, seed)
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, str(script), *recipe.args], cwd=script.parent, env=env,
                                  capture_output=True, text=True, timeout=timeout)
            rc, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired:
            rc, err = 124, f"timed out after {timeout:.0f} s"
        ranks = mc._read(out)
        records = ranks.get(0) or next(iter(ranks.values()), [])
        losses = [x for r in records for x in r["losses"]]
        last = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith(" ")]
        errors = [ln for ln in last if "Error" in ln.split(":", 1)[0] or "Exception" in ln.split(":", 1)[0]]
        error = (errors or last or [""])[-1][:160] if rc != 0 else ""
        if rc == 0 and not records:
            error = "exited 0 with no optimizer step recorded (every step skipped, or the epoch ended first)"
        at = mc._failed_at(err, root) if rc != 0 else None
        if at:
            error = f"{error} (at {at})"
        return Result(recipe, rc, len(records), losses, error, time.time() - t0)


def markdown(results: list) -> str:
    lines = [f"Ascend/ModelZoo-PyTorch@{COMMIT[:10]}, emulated npu (one card), steps recorded by the probe.", "",
             "| script | family | ran | stepped on npu | finite loss | losses (per backward) | CPU reference | "
             "cause of failure |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        rec = r.recipe
        lines.append(f"| `{rec.folder.split('/')[-1]}/{rec.script}` ({rec.name}) | {rec.family} | "
                     f"{'yes' if r.rc in (0,) or r.steps else 'no'} | {r.steps} | {'yes' if r.finite else 'no'} | "
                     f"{', '.join(f'{x:.4g}' for x in r.losses[:4]) or '-'} | NPU-only | "
                     f"{r.error.replace('|', '/') or rec.note or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--fake-size", type=int, default=64,
                    help="images per generated dataset: enough batches that a dynamic loss scaler's first skipped "
                         "steps (fp16 overflow at 2**16) leave optimizer steps to record")
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    known = {r.name for r in RECIPES}
    if a.only and set(a.only) - known:
        print(f"error: no recipe named {', '.join(sorted(set(a.only) - known))}; known: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    base = a.mirrors / REPO.replace("/", "+")
    git_dir = base / "repo" if (base / "repo").exists() else base
    if not git_dir.is_dir():
        print(f"error: no mirror of {REPO} at {base}; fetch it (github:{REPO}) or pass --mirrors", file=sys.stderr)
        return 2
    results = []
    for rec in RECIPES:
        if a.only and rec.name not in a.only:
            continue
        res = run(rec, git_dir, a.steps, a.timeout, fake_size=a.fake_size)
        results.append(res)
        print(f"{rec.name}: {res.status}, {res.steps} steps, losses {res.losses[:4]}, {res.seconds:.0f} s"
              f"{', ' + res.error if res.error else ''}", file=sys.stderr, flush=True)
    table = markdown(results)
    sys.stdout.write(table)
    if a.markdown:
        a.markdown.write_text(table, encoding="utf-8")
    if a.json:
        a.json.write_text(json.dumps([{"name": r.recipe.name, "rc": r.rc, "steps": r.steps, "losses": r.losses,
                                       "error": r.error, "seconds": round(r.seconds, 1)} for r in results], indent=2))
    return 0 if all(r.status == "trains" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
