#!/usr/bin/env python3
"""The probe battery (issue 24): try what a new user, a kill or an outage does to torchport, and print
``probe -> verdict -> what the user saw``.

Each probe runs the real ``torchport`` command (``python -m torchport``) in a fresh temp directory and
judges the outcome by the project's rules: no traceback, no crash (signal exit), a documented exit code,
one line naming the problem -- and above all no silent success (exit 0 with something lost or never
done). Verdicts: ``ok``; ``FAIL: why``; ``skip: why`` (a prerequisite is missing here, e.g. moto's S3
server for the object-store probes, or root for the tmpfs probes).

Usage::

    .venv/bin/python tools/probes.py                 # all probes, table on stdout
    .venv/bin/python tools/probes.py -k fix -k scan  # probes whose name contains fix or scan
    .venv/bin/python tools/probes.py --json out.json # also the rows as JSON

Exit status: 0 when no probe failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Callable

PY = sys.executable
TINY = ["--model", "tinycnn", "--image-size", "32", "--batch-size", "8", "--epochs", "1", "--workers", "0",
        "--progress", "plain", "--no-tensorboard", "--log-every", "1"]
CUDA = 'import torch\nx = torch.randn(3).cuda()\ny = torch.device("cuda")\n'
CRASH_EXITS = {139, 134, -11, -6, -9, 137}


@dataclasses.dataclass
class Res:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def tp(*args, cwd, env=None, timeout=300, extra_env=None) -> Res:
    e = dict(env or ENV)
    e.update(extra_env or {})
    try:
        p = subprocess.run([PY, "-m", "torchport", *map(str, args)], cwd=cwd, env=e, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return Res(124, (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or ""),
                   f"(timed out after {timeout}s)")
    return Res(p.returncode, p.stdout, p.stderr)


def seen(res: Res, prefer: str | None = None) -> str:
    """The line a user reads: an ``error:`` line, else one containing ``prefer``, else the last line."""
    lines = [ln.strip() for ln in res.text.splitlines() if ln.strip()]
    pick = ([ln for ln in lines if "error:" in ln] or [ln for ln in lines if prefer and prefer in ln] or lines[-1:]
            or ["(no output)"])[0]
    return pick[:150]


def clean(res: Res) -> str | None:
    """The generic rules: no traceback, no crash; None when both hold, else why not."""
    if "Traceback (most recent call last)" in res.text:
        return "traceback"
    if res.code in CRASH_EXITS or res.code < 0:
        return f"crashed (exit {res.code})"
    if res.code == 124:
        return "timed out"
    return None


def judge(res: Res, ok_codes, *, prefer=None, also: Callable[[], str | None] | None = None) -> tuple[str, str]:
    why = clean(res)
    if why is None and res.code not in ok_codes:
        why = f"exit {res.code}, expected {'/'.join(map(str, ok_codes))}"
    if why is None and also is not None:
        why = also()
    return ("ok" if why is None else f"FAIL: {why}"), f"[exit {res.code}] {seen(res, prefer)}"


# ---------------------------------------------------------------------------------------------- fixtures
ENV = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_")}
ENV.update(PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", COLUMNS="400")


def folder(root: Path, classes=3, per_class=16) -> Path:
    from torchport.data.synth import make_dataset

    make_dataset(root, classes=classes, train_per_class=per_class, val_per_class=4, size=32)
    return root


def packed(tmp: Path, mode="predecoded") -> Path:
    from torchport.data.pack import pack_splits

    src = folder(tmp / "src")
    pack_splits(src, tmp / "shards", mode=mode, workers=1, size=32)
    return tmp / "shards"


def reseal(root: Path, edit_index=None, edit_manifest=None) -> None:
    import numpy as np

    idx = np.load(root / "index.npy")
    manifest = json.loads((root / "index.json").read_text())
    if edit_index:
        edit_index(idx)
    np.save(root / "index.npy", idx, allow_pickle=False)
    manifest["index"]["sha256"] = hashlib.sha256((root / "index.npy").read_bytes()).hexdigest()
    if edit_manifest:
        edit_manifest(manifest)
    (root / "index.json").write_text(json.dumps(manifest))


def garble(shard_dir: Path, sample=5) -> None:
    import numpy as np

    row = np.load(shard_dir / "index.npy")[sample]
    with open(shard_dir / f"shard-{int(row['shard']):05d}.tps", "r+b") as f:
        f.seek(int(row["offset"]) + int(row["nbytes"]) // 2)
        f.write(b"\x5a" * 16)


def bomb_jpeg(h=16000, w=16000) -> bytes:
    import numpy as np
    import simplejpeg

    data = bytearray(simplejpeg.encode_jpeg(np.zeros((8, 8, 3), np.uint8), quality=50))
    i = data.index(b"\xff\xc0")
    data[i + 5:i + 9] = struct.pack(">HH", h, w)
    return bytes(data)


@contextlib.contextmanager
def tmpfs(path: Path, size: str, ro: bool = False):
    """A small tmpfs at ``path`` (root only); yields False when it cannot be mounted here."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    ok = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                                              capture_output=True).returncode == 0
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


class S3:
    """moto's standalone S3 server on 127.0.0.1 (as s3fs's own tests use), started on first use."""

    proc = None
    url = None

    @classmethod
    def env(cls) -> dict[str, str] | None:
        if cls.url is None:
            try:
                import boto3  # noqa: F401
                import moto  # noqa: F401
            except ImportError:
                return None
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            cls.proc = subprocess.Popen([PY, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cls.url = f"http://127.0.0.1:{port}"
            for _ in range(150):
                try:
                    urllib.request.urlopen(cls.url + "/moto-api/", timeout=1).read()
                    break
                except Exception:
                    time.sleep(0.2)
        return {**ENV, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": cls.url, "TORCHPORT_STORAGE_BACKOFF_S": "0.01", "TORCHPORT_STORAGE_TIMEOUT_S": "5",
                "TORCHPORT_STORAGE_RETRIES": "2"}

    @classmethod
    def bucket(cls) -> str:
        import boto3

        name = "probe-" + uuid.uuid4().hex[:10]
        boto3.client("s3", endpoint_url=cls.url, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=name)
        return name

    @classmethod
    def stop(cls) -> None:
        if cls.proc is not None:
            cls.proc.terminate()
            cls.proc.wait(10)


# ------------------------------------------------------------------------------------------------ probes
PROBES: list[tuple[str, str, Callable[[Path], tuple[str, str]]]] = []


def probe(name: str, what: str, *, s3: bool = False):
    """Register a probe; with ``s3``, it gets the environment of a running S3 server (or is skipped)."""
    def deco(fn):
        def run(t):
            if not s3:
                return fn(t)
            env = S3.env()
            return ("skip: moto (S3 server) not installed", "") if env is None else fn(t, env)
        PROBES.append((name, what, run))
        return fn
    return deco


# -- data: read is checked ----------------------------------------------------------------------------
@probe("shard-garbled-sample-local", "predecoded shard with damaged sample bytes (same size), then train")
def _(t):
    root = packed(t)
    garble(root / "train")
    r = tp("train", "--data", root, *TINY, "--run-dir", t / "run", cwd=t)

    def trained_on_garbage():
        if r.code == 0:
            s = json.loads((t / "run" / "summary.json").read_text())
            return None if s.get("bad_files") else "exit 0 and no damaged sample counted"
        return None
    return judge(r, {0, 3}, also=trained_on_garbage)


def _packed_in_store(t: Path, env: dict, mode: str, damage: Callable[[bytearray, Path], None]) -> str:
    """Pack a small ImageFolder to a fresh bucket, then rewrite each shard object with ``damage`` applied."""
    import boto3

    from torchport.data.pack import pack_splits

    src = folder(t / "src")
    url = f"s3://{S3.bucket()}/data"
    old = dict(os.environ)
    os.environ.update(env)
    try:
        from torchport.storage import store

        store._CLIENTS.clear()
        pack_splits(src, url, mode=mode, workers=1, size=32)
    finally:
        os.environ.clear()
        os.environ.update(old)
    s3 = boto3.client("s3", endpoint_url=S3.url, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    bucket = url.split("/")[2]
    for obj in s3.list_objects_v2(Bucket=bucket)["Contents"]:
        if obj["Key"].endswith(".tps"):
            body = bytearray(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
            damage(body, Path(obj["Key"]))
            s3.put_object(Bucket=bucket, Key=obj["Key"], Body=bytes(body))
    return url


@probe("shard-garbled-jpeg-object-s3", "every sample of the JPEG shard objects in the store garbled, then train", s3=True)
def _(t, env):
    def zero(body, _key):
        body[64:] = bytes(len(body) - 64)          # header intact, every sample zeroed
    url = _packed_in_store(t, env, "jpeg", zero)
    r = tp("train", "--data", url, *TINY, "--run-dir", t / "run", cwd=t, env={**env, "TORCHPORT_STORAGE_CACHE": str(t / "c")})
    return judge(r, {3})


@probe("shard-garbled-predecoded-object-s3", "a few pixels of predecoded shard objects in the store flipped, then train",
       s3=True)
def _(t, env):
    def flip(body, _key):                          # same size, header intact: only the sample crc32s can tell
        for off in range(4096, len(body), 40000):
            body[off] ^= 0xFF
    url = _packed_in_store(t, env, "predecoded", flip)
    r = tp("train", "--data", url, *TINY, "--run-dir", t / "run", cwd=t, env={**env, "TORCHPORT_STORAGE_CACHE": str(t / "c")})

    def counted():
        if r.code != 0:
            return None
        s = json.loads((t / "run" / "summary.json").read_text())
        return None if s.get("bad_files") else "exit 0 and no damaged sample counted (trained on garbage)"
    return judge(r, {0, 3}, prefer="crc32", also=counted)


@probe("shard-label-out-of-range", "index row with label 99 (3 classes), sha resealed; data verify + train")
def _(t):
    root = packed(t)
    reseal(root / "train", edit_index=lambda i: i["label"].__setitem__(3, 99))
    v = tp("data", "verify", root / "train", cwd=t)
    if v.code == 0:
        return "FAIL: data verify exits 0", seen(v)
    return judge(tp("train", "--data", root, *TINY, "--run-dir", t / "run", cwd=t), {3})


@probe("shard-id-out-of-range", "index row pointing at shard 7 of 1, sha resealed; data verify")
def _(t):
    root = packed(t)
    reseal(root / "train", edit_index=lambda i: i["shard"].__setitem__(3, 7))
    return judge(tp("data", "verify", root / "train", cwd=t), {1, 3})


@probe("manifest-missing-key", "index.json without its 'shards' key; data inspect")
def _(t):
    root = packed(t)
    reseal(root / "train", edit_manifest=lambda m: m.pop("shards"))
    return judge(tp("data", "inspect", root / "train", cwd=t), {1, 3})


@probe("shard-truncated", "last shard cut short by 1000 bytes; train")
def _(t):
    root = packed(t)
    shard = sorted((root / "train").glob("*.tps"))[-1]
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 1000)
    return judge(tp("train", "--data", root, *TINY, "--run-dir", t / "run", cwd=t), {3})


@probe("folder-all-unreadable", "ImageFolder whose every .jpg is garbage (--bad-files skip); train")
def _(t):
    for c in ("a", "b"):
        (t / "junk" / c).mkdir(parents=True)
        for i in range(12):
            (t / "junk" / c / f"{i}.jpg").write_bytes(os.urandom(400))
    return judge(tp("train", "--data", t / "junk", *TINY, "--run-dir", t / "run", cwd=t), {3})


@probe("pack-decompression-bomb", "628-byte JPEG claiming 16000x16000 in the source; data pack")
def _(t):
    src = folder(t / "src")
    (src / "train" / "circle" / "bomb.jpg").write_bytes(bomb_jpeg())
    r = tp("data", "pack", src / "train", t / "out", "--workers", "1", cwd=t)

    def reported():
        rep = json.loads((t / "out" / "pack_report.json").read_text())
        bad = [s for s in rep["skipped_files"] if s["path"].endswith("bomb.jpg")]
        return None if bad and "pixel limit" in bad[0]["reason"] else "bomb not refused from its header"
    return judge(r, {0}, prefer="bomb", also=reported)


@probe("pack-self-symlink", "a symlink to itself where a class folder would be; data pack")
def _(t):
    src = folder(t / "src") / "train"
    os.symlink("loop", src / "loop")
    r = tp("data", "pack", src, t / "out", "--workers", "1", cwd=t)
    return judge(r, {0}, also=lambda: None if "loop" in (t / "out" / "pack_report.json").read_text() else "not reported")


@probe("pack-dangling-symlink", "an image symlink whose target is gone; data pack")
def _(t):
    src = folder(t / "src") / "train"
    os.symlink(t / "gone.jpg", src / "circle" / "gone.jpg")
    r = tp("data", "pack", src, t / "out", "--workers", "1", cwd=t)
    return judge(r, {0}, prefer="gone.jpg",
                 also=lambda: None if "gone.jpg" in (t / "out" / "pack_report.json").read_text() else "dropped silently")


# -- train: outputs, resume, writers, stops -------------------------------------------------------------
@probe("train-json-under-file", "--json afile/s.json where afile is a file")
def _(t):
    src = folder(t / "src")
    (t / "afile").write_text("x")
    r = tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--json", t / "afile" / "s.json", cwd=t)
    return judge(r, {6}, also=lambda: "trained first" if (t / "run" / "checkpoints").exists() else None)


@probe("train-torn-metrics-resume", "torn last line in metrics.jsonl, then --resume auto")
def _(t):
    src = folder(t / "src")
    tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--max-steps", "2", cwd=t)
    with open(t / "run" / "metrics.jsonl", "a") as f:
        f.write('{"kind": "step", "st')
    r = tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--resume", "auto", "--max-steps", "4", cwd=t)
    return judge(r, {0}, also=lambda: None if (t / "run" / "summary.json").exists() else "no summary.json")


@probe("train-resume-other-optimizer", "--resume auto with --optimizer adamw over an sgd checkpoint")
def _(t):
    src = folder(t / "src")
    tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--max-steps", "2", "--optimizer", "sgd", cwd=t)
    return judge(tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--resume", "auto", "--optimizer", "adamw",
                    "--max-steps", "4", cwd=t), {5})


@probe("train-resume-other-classes", "--resume auto with --num-classes 7 over a 3-class checkpoint")
def _(t):
    src = folder(t / "src")
    tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--max-steps", "2", cwd=t)
    r = tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--resume", "auto", "--num-classes", "7",
           "--max-steps", "4", cwd=t)
    return judge(r, {5}, also=lambda: None if "ckpt-" in seen(r) and "weight" in seen(r) else "does not name checkpoint/keys")


@probe("train-disk-full-tmpfs", "--run-dir on a 512 KiB tmpfs (fills up during the run)")
def _(t):
    src = folder(t / "src")
    with tmpfs(t / "small", "512k") as ok:
        if not ok:
            return "skip: needs root to mount a tmpfs", ""
        r = tp("train", "--data", src, *TINY, "--run-dir", t / "small" / "run", "--model", "resnet18", cwd=t)
        return judge(r, {5, 6})


@probe("train-read-only-run-dir", "--run-dir inside a read-only mount")
def _(t):
    src = folder(t / "src")
    with tmpfs(t / "ro", "1m", ro=True) as ok:
        if not ok:
            return "skip: needs root to mount a read-only tmpfs", ""
        return judge(tp("train", "--data", src, *TINY, "--run-dir", t / "ro" / "run", cwd=t), {6})


@probe("train-two-writers", "two trainers on one --run-dir at once (part A: one writer per run)")
def _(t):
    src = folder(t / "src", per_class=40)
    cmd = [PY, "-m", "torchport", "train", "--data", str(src), *TINY, "--run-dir", str(t / "run")]
    ps = [subprocess.Popen(cmd, cwd=t, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in ps]
    rs = [Res(p.returncode, o, e) for p, (o, e) in zip(ps, outs)]
    if all(r.code == 0 for r in rs):
        return "FAIL: both exit 0 on one run dir", f"[exit 0, 0] {seen(rs[1])}"
    loser = next(r for r in rs if r.code != 0)
    if "training finished" in loser.text or "done:" in loser.text:
        return "FAIL: the second writer trained too (no refusal up front)", f"[exit {loser.code}] {seen(loser)}"
    return judge(loser, {loser.code})


def _signal_train(t, sig, workers="0"):
    src = folder(t / "src", per_class=60)
    args = [PY, "-m", "torchport", "train", "--data", str(src), *TINY, "--workers", workers, "--epochs", "3",
            "--run-dir", str(t / "run")]
    p = subprocess.Popen(args, cwd=t, env={**ENV, "TORCHPORT_TRAIN_TEST_STEP_DELAY_S": "0.2"}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and p.poll() is None:
        m = t / "run" / "metrics.jsonl"
        if m.exists() and m.read_text().count('"kind": "step"') >= 3:
            break
        time.sleep(0.1)
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    return Res(p.returncode, out, err)


@probe("train-sigterm", "SIGTERM mid-run (part A: graceful stop with the resume command)")
def _(t):
    r = _signal_train(t, signal.SIGTERM)
    return judge(r, {130, 143, 0, 1, 5, 6}, prefer="resume",
                 also=lambda: None if "--resume" in r.text else "no resume command printed")


@probe("train-ctrl-c-workers", "SIGINT mid-run with 2 DataLoader workers: one line, no worker tracebacks")
def _(t):
    r = _signal_train(t, signal.SIGINT, workers="2")
    return judge(r, {130}, prefer="interrupt")


@probe("train-run-dir-s3", "--run-dir s3://bucket/run (part A: supported or refused, never a local 's3:' dir)")
def _(t):
    src = folder(t / "src")
    r = tp("train", "--data", src, *TINY, "--run-dir", "s3://bucket/run", "--max-steps", "1", cwd=t,
           env=S3.env() or ENV)
    if (t / "s3:").exists():
        return "FAIL: wrote a local folder named s3:", seen(r)
    return judge(r, {0, 2, 6})


# -- object store ---------------------------------------------------------------------------------------
@probe("store-doctor-missing-bucket", "doctor --store s3://no-such-bucket/x (part A)", s3=True)
def _(t, env):
    r = tp("doctor", "--store", "s3://no-such-bucket-probe/x", cwd=t, env=env)
    return judge(r, {1, 6}, also=lambda: "reports the missing bucket as ok" if "listable" in r.text else None)


@probe("store-pack-missing-bucket", "data pack SRC s3://no-such-bucket/x (part A)", s3=True)
def _(t, env):
    src = folder(t / "src") / "train"
    r = tp("data", "pack", src, "s3://no-such-bucket-probe/x", "--workers", "1", cwd=t, env=env)
    return judge(r, {6}, also=lambda: "a missing bucket reported as a missing object" if ".tps does not exist" in r.text
                 else None)


@probe("store-outage-during-train", "S3 endpoint unreachable for --checkpoint-dir (wrong port)", s3=True)
def _(t, env):
    src = folder(t / "src")
    bad = {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    r = tp("train", "--data", src, *TINY, "--run-dir", t / "run", "--checkpoint-dir", "s3://b/ck", cwd=t, env=bad)
    return judge(r, {5, 6})


def _staging(f: Path) -> bool:
    return "torchport-staging" in f.name or ".tmp-" in f.name   # the name now, and before issue 24


@probe("store-kill-during-upload", "SIGKILL during s3:// checkpoint uploads, then a second run: staging files in TMPDIR", s3=True)
def _(t, env):
    src = folder(t / "src", per_class=40)
    stage = t / "tmpdir"
    stage.mkdir()
    ck = f"s3://{S3.bucket()}/ck"
    e = {**env, "TMPDIR": str(stage), "TORCHPORT_STORAGE_CACHE": str(t / "c")}
    args = [PY, "-m", "torchport", "train", "--data", str(src), *TINY, "--epochs", "3", "--checkpoint-every", "1",
            "--run-dir", str(t / "run"), "--checkpoint-dir", ck]
    caught = 0
    for _ in range(2):
        p = subprocess.Popen(args, cwd=t, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and not any(_staging(f) for f in stage.iterdir()):
            time.sleep(0.01)
        p.kill()
        p.wait()
        caught += any(_staging(f) for f in stage.iterdir())
    if not caught:
        return "skip: no upload was in flight when the trainer was killed", ""
    r = tp("train", "--data", src, *TINY, "--max-steps", "1", "--run-dir", t / "run2", "--checkpoint-dir", ck + "2",
           cwd=t, env=e)
    left = [f.name for f in stage.iterdir() if _staging(f)]
    return judge(r, {0}, also=lambda: f"{len(left)} staging file(s) left in TMPDIR" if left else None)


# -- migrate: scan / fix on odd files, races ------------------------------------------------------------
def _tree(root: Path, n: int) -> list[Path]:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"f{i:02d}.py").write_text(CUDA)
    return sorted(root.glob("*.py"))


@probe("scan-5000-nested-parens", "a .py with 5,000 nested parentheses among 2 normal files; scan")
def _(t):
    _tree(t / "src", 2)
    (t / "src" / "deep.py").write_text("import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    r = tp("scan", "src", cwd=t)
    return judge(r, {6}, prefer="deep.py", also=lambda: None if "4 finding(s) in 2 file(s)" in r.text else "others not scanned")


@probe("fix-tree-with-deep-file", "fix --write on 20 files + one 5,000-paren file")
def _(t):
    files = _tree(t / "src", 20)
    (t / "src" / "deep.py").write_text("import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    r = tp("fix", "--write", "src", cwd=t)
    left = [f.name for f in files if "cuda()" in f.read_text()]
    return judge(r, {6}, prefer="deep.py", also=lambda: f"{len(left)} file(s) left unfixed" if left else None)


@probe("fix-concurrent", "two fix --write at once on a 30-file tree")
def _(t):
    files = _tree(t / "src", 30)
    ps = [subprocess.Popen([PY, "-m", "torchport", "fix", "--write", "src"], cwd=t, env=ENV, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for _ in range(2)]
    rs = [Res(p.returncode, *p.communicate(timeout=300)) for p in ps]
    rs = [Res(p.returncode, r.out, r.err) for p, r in zip(ps, rs)]
    left = [f.name for f in files if "cuda()" in f.read_text()]
    if left:
        return f"FAIL: {len(left)} file(s) left CUDA-only", f"[exit {rs[0].code}, {rs[1].code}]"
    worst = max(rs, key=lambda r: r.code)
    return judge(worst, {0, 6})


@probe("fix-while-edited", "the file is saved by the user while fix --write analyses it")
def _(t):
    (t / "train.py").write_text(CUDA)
    code = ("import sys\nfrom pathlib import Path\nfrom torchport.migrate import engine, runner\n"
            "real = engine.analyze\n"
            "def slow(src, *a, **k):\n    r = real(src, *a, **k)\n"
            "    Path('train.py').write_text(src + '# edit saved meanwhile\\n')\n    return r\n"
            "engine.analyze = slow\n"
            "rep = runner.run(['train.py'], runner.Options(write=True, jobs=1))\n"
            "print('; '.join(e.message for e in rep.errors) or 'no error')\n")
    p = subprocess.run([PY, "-c", code], cwd=t, env=ENV, capture_output=True, text=True, timeout=120)
    r = Res(6 if "changed since" in p.stdout else p.returncode, p.stdout, p.stderr)
    lost = "# edit saved meanwhile" not in (t / "train.py").read_text()
    return judge(r, {6}, also=lambda: "the user's edit was overwritten" if lost else None)


@probe("scan-binary-py", "a .py file of random bytes; scan")
def _(t):
    (t / "bin.py").write_bytes(os.urandom(2000) + b"torch.cuda")
    return judge(tp("scan", "bin.py", cwd=t), {6, 0, 1})


@probe("scan-latin1-no-cookie", "a latin-1 .py without an encoding cookie; scan")
def _(t):
    (t / "l1.py").write_bytes("import torch\n# caf\xe9\nx = torch.randn(2).cuda()\n".encode("latin-1"))
    return judge(tp("scan", "l1.py", cwd=t), {6, 1})


@probe("scan-nul-bytes", "a .py containing NUL bytes; scan")
def _(t):
    (t / "nul.py").write_bytes(b"import torch\nx = 1\x00\x00\ny = torch.randn(2).cuda()\n")
    return judge(tp("scan", "nul.py", cwd=t), {6, 1})


@probe("fix-read-only-file", "fix --write on a file in a read-only mount")
def _(t):
    with tmpfs(t / "ro", "1m") as ok:
        if not ok:
            return "skip: needs root to mount a tmpfs", ""
        (t / "ro" / "a.py").write_text(CUDA)
        subprocess.run(["mount", "-o", "remount,ro", str(t / "ro")], check=True)
        r = tp("fix", "--write", t / "ro" / "a.py", cwd=t)
        return judge(r, {6}, prefer="could not write")


@probe("scan-symlink-loop-in-tree", "a .py symlink to itself inside the scanned tree")
def _(t):
    _tree(t / "src", 2)
    os.symlink("loop.py", t / "src" / "loop.py")
    r = tp("scan", "src", cwd=t)
    return judge(r, {1, 6}, also=lambda: None if "4 finding(s)" in r.text else "others not scanned")


# -- run: abnormal exits ---------------------------------------------------------------------------------
def _run_script(t, body: str, *extra) -> tuple[Res, list[str]]:
    (t / "s.py").write_text("import os, torch\nx = torch.zeros(2).cuda()\n" + body)
    (t / "tmpdir").mkdir()
    r = tp("run", "-o", "r.json", *extra, "s.py", cwd=t, extra_env={"TMPDIR": str(t / "tmpdir")})
    return r, [p.name for p in (t / "tmpdir").iterdir()]


@probe("run-os-exit-7", "script ends with os._exit(7); run -o r.json")
def _(t):
    r, left = _run_script(t, "os._exit(7)\n")
    return judge(r, {7}, prefer="redirect", also=lambda: "no r.json" if not (t / "r.json").exists()
                 else (f"temp dir left: {left}" if left else None))


@probe("run-sys-exit-message", "script raises SystemExit('bad args'); run -o r.json")
def _(t):
    r, left = _run_script(t, "raise SystemExit('bad args')\n")
    return judge(r, {1}, also=lambda: "no r.json" if not (t / "r.json").exists() else (f"temp dir left: {left}" if left else None))


def _killed_then_next_run(t, body: str) -> tuple[str, str]:
    """A script that dies without any cleanup possible: what is left in TMPDIR once the *next* run is done."""
    r, left = _run_script(t, body)
    (t / "next.py").write_text("import torch\n")
    tp("run", "next.py", cwd=t, extra_env={"TMPDIR": str(t / "tmpdir")})
    still = [p.name for p in (t / "tmpdir").iterdir()]
    why = f"temp dir still there after the next run: {still}" if still else None
    note = f"{len(left)} temp dir(s) left by the killed run, removed by the next run" if left and not still else seen(r)
    return ("ok" if why is None else f"FAIL: {why}"), f"[exit {r.code}] {note}"


@probe("run-self-sigkill", "script SIGKILLs itself under run -o r.json (no report possible), then another run")
def _(t):
    return _killed_then_next_run(t, "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n")


@probe("run-script-segfault", "script crashes with SIGSEGV (ctypes) under run, then another run")
def _(t):
    return _killed_then_next_run(t, "import ctypes\nctypes.string_at(0)\n")


# -- bad TORCHPORT_EMULATE -------------------------------------------------------------------------------
for _value in ("npu:0", "npu:-1", "npu:abc", "gpu"):
    def _emulate(t, value=_value):
        return judge(tp("doctor", cwd=t, extra_env={"TORCHPORT_EMULATE": value}), {2}, prefer="TORCHPORT_EMULATE")
    probe(f"emulate-{_value.replace(':', '-')}-doctor", f"TORCHPORT_EMULATE={_value} torchport doctor")(_emulate)


@probe("emulate-npu0-train", "TORCHPORT_EMULATE=npu:0 torchport train")
def _(t):
    return judge(tp("train", "--epochs", "1", "--run-dir", t / "run", cwd=t, extra_env={"TORCHPORT_EMULATE": "npu:0"}), {2})


# -- trust (issue 36): files from elsewhere are data ----------------------------------------------------------
_TESTS_RT = Path(__file__).resolve().parents[1] / "tests" / "runtime"


def _hostile():
    if str(_TESTS_RT) not in sys.path:
        sys.path.insert(0, str(_TESTS_RT))
    import _hostile as h
    return h


def trainer_dcp(t: Path) -> Path:
    """A trainer (fsdp) checkpoint directory made in-process: tinycnn, AdamW, config in torchport.pt."""
    import torch

    from torchport.models import build_model
    from torchport.runtime import checkpoint as ckpt
    from torchport.runtime.dcp import save_state
    from torchport.train.config import TrainConfig
    from torchport.train.optim import build_optimizer

    cfg = TrainConfig(model="tinycnn", image_size=16, num_classes=3, optimizer="adamw", strategy="fsdp")
    torch.manual_seed(0)
    model = build_model("tinycnn", num_classes=3, image_size=16)
    opt = build_optimizer(model, name="adamw", lr=0.01, momentum=0.9, weight_decay=0.05)
    for group in opt.param_groups:
        group.setdefault("initial_lr", group["lr"])      # what the trainer's LR schedule adds
    model(torch.randn(2, 3, 16, 16)).sum().backward()
    opt.step()
    path = t / "run" / "checkpoints" / "step-000000001"
    save_state(path, model=model, optimizer=opt,
               extra=ckpt.capture(progress={"step": 1, "epoch": 0}, config=cfg.to_dict()))
    (path.parent / "latest.json").write_text(json.dumps({"dir": path.name, "step": 1}))
    return path


def _damage_dcp(path: Path, form: str, marker: Path) -> None:
    h = _hostile()
    meta = path / ".metadata"
    if form == "planted-metadata":
        h.plant_metadata(path, marker)
    elif form == "planted-item":
        h.plant_item(path, marker)
    elif form == "shard-path-out":
        h.point_item(path, "../../outside.distcp", fqn=_first_tensor(path))
    elif form == "shard-absolute":
        h.point_item(path, "/etc/passwd", fqn=_first_tensor(path))
    elif form == "shard-symlink-out":
        outside = path.parent.parent / "elsewhere.distcp"
        shard = next(path.glob("__0_*.distcp"))
        outside.write_bytes(shard.read_bytes())
        os.symlink(outside, path / "link.distcp")
        h.point_item(path, "link.distcp", fqn=_first_tensor(path))
    else:
        data = meta.read_bytes()
        meta.write_bytes({"empty-metadata": b"", "truncated-metadata": data[: len(data) // 2],
                          "garbled-metadata": b"\x80\x05garbage" + data[40:]}[form])
        h.reseal(path)


def _first_tensor(path: Path) -> str:
    import pickle

    meta = pickle.loads((path / ".metadata").read_bytes())     # the probe's own file
    return next(k.fqn for k, v in meta.storage_data.items() if k.fqn.startswith("model."))


def _refusal_judge(r: Res, marker: Path, form: str) -> tuple[str, str]:
    def also():
        if marker.exists():
            return "the planted pickle RAN"
        if "weights_only" in r.text:
            return "torch's weights_only advice shown"
        if form.startswith("planted") and "refused on purpose" not in r.text:
            return "not reported as a refusal"
        if form.startswith("shard") and "outside" not in r.text and "symlink" not in r.text:
            return "the path out of the checkpoint was not named"
        return None
    return judge(r, {5}, also=also)


_DCP_FORMS = ("planted-metadata", "planted-item", "shard-path-out", "shard-absolute", "shard-symlink-out",
              "empty-metadata", "truncated-metadata", "garbled-metadata")
for _form in _DCP_FORMS:
    def _convert(t, form=_form):
        path = trainer_dcp(t)
        _damage_dcp(path, form, t / "ran")
        r = Res(*(lambda p: (p.returncode, p.stdout, p.stderr))(subprocess.run(
            [PY, "-m", "torchport.train.convert", str(path), str(t / "out.pt")], cwd=t, env=ENV, capture_output=True,
            text=True, timeout=300)))
        return _refusal_judge(r, t / "ran", form)

    def _resume(t, form=_form):
        path = trainer_dcp(t)
        _damage_dcp(path, form, t / "ran")
        folder(t / "data", per_class=4)
        r = tp("train", "--data", t / "data", *TINY, "--image-size", "16", "--strategy", "fsdp", "--device", "cpu",
               "--run-dir", t / "run", "--resume", path, cwd=t)
        return _refusal_judge(r, t / "ran", form)

    probe(f"trust-convert-dcp-{_form}", f"python -m torchport.train.convert on a DCP checkpoint with {_form}")(_convert)
    probe(f"trust-resume-fsdp-{_form}", f"train --strategy fsdp --resume DIR with {_form}")(_resume)


for _plant in ("planted-metadata", "planted-item"):
    def _s3(t, env, plant=_plant):
        from torchport.storage import store

        path = trainer_dcp(t)
        _damage_dcp(path, plant, t / "ran")
        url = f"s3://{S3.bucket()}/ck/step-000000001"
        old = dict(os.environ)
        os.environ.update(env)
        try:
            store._CLIENTS.clear()
            for f in path.iterdir():
                store.write_bytes(f"{url}/{f.name}", f.read_bytes())
        finally:
            os.environ.clear()
            os.environ.update(old)
        p = subprocess.run([PY, "-m", "torchport.train.convert", url, str(t / "out.pt")], cwd=t, env=env,
                           capture_output=True, text=True, timeout=300)
        return _refusal_judge(Res(p.returncode, p.stdout, p.stderr), t / "ran", plant)
    probe(f"trust-convert-s3-{_plant}", f"convert s3://.../step-N whose DCP checkpoint has a {_plant}", s3=True)(_s3)


for _fmt in ("zip", "legacy", "tar"):
    def _pt(t, fmt=_fmt):
        import io as _io
        import pickle
        import tarfile

        import torch

        h = _hostile()
        f = t / "ckpt-000000001.pt"
        evil = {"model": h.Planted(t / "ran")}
        if fmt == "tar":
            with tarfile.open(f, "w") as tf:
                for name, obj in (("sys_info", {"protocol_version": 1001, "little_endian": True,
                                                "type_sizes": {"short": 2, "int": 4, "long": 8}}), ("pickle", evil)):
                    data = pickle.dumps(obj)
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, _io.BytesIO(data))
        else:
            torch.save(evil, f, _use_new_zipfile_serialization=fmt == "zip")
        folder(t / "data", per_class=4)
        r = tp("train", "--data", t / "data", *TINY, "--run-dir", t / "run", "--resume", f, cwd=t)
        return _refusal_judge(r, t / "ran", "planted")
    probe(f"trust-resume-pt-{_fmt}", f"train --resume x.pt, a planted pickle in torch's {_fmt} format")(_pt)


@probe("trust-convert-pt-tar", "python -m torchport.train.convert on a planted .pt in torch's legacy tar format")
def _(t):
    import io as _io
    import pickle
    import tarfile

    f = t / "ckpt-000000001.pt"
    with tarfile.open(f, "w") as tf:
        for name, obj in (("sys_info", {"protocol_version": 1001, "little_endian": True,
                                        "type_sizes": {"short": 2, "int": 4, "long": 8}}),
                          ("pickle", {"model": _hostile().Planted(t / "ran")})):
            data = pickle.dumps(obj)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, _io.BytesIO(data))
    p = subprocess.run([PY, "-m", "torchport.train.convert", str(f), str(t / "out")], cwd=t, env=ENV,
                       capture_output=True, text=True, timeout=300)
    return _refusal_judge(Res(p.returncode, p.stdout, p.stderr), t / "ran", "planted")


@probe("trust-pack-second-writer", "data pack into an output another pack holds (its lock file taken)")
def _(t):
    from filelock import FileLock

    folder(t / "src", per_class=4)
    (t / "out").mkdir()
    with FileLock(str(t / "out" / ".train.torchport.lock"), timeout=0):
        r = tp("data", "pack", "src", "out", "--workers", "1", cwd=t)
    return judge(r, {9}, also=lambda: None if "in use by another data pack" in r.text else "the first pack not named")


_MANIFEST_EDITS = {
    "index-sha-dotdot": lambda d: d["index"].update(sha256="../../../../../x/pwned"),
    "shard-sha-dotdot": lambda d: d["shards"][0].update(sha256="../../../x/pwned"),
    "index-file-dotdot": lambda d: d["index"].update(file="../x/index.npy"),
    "index-file-absolute": lambda d: d["index"].update(file="/etc/hostname"),
}
for _name, _edit in _MANIFEST_EDITS.items():
    def _manifest(t, edit=_edit):
        root = packed(t)
        m = root / "train" / "index.json"
        doc = json.loads(m.read_text())
        edit(doc)
        m.write_text(json.dumps(doc))
        r = tp("data", "verify", root / "train", cwd=t)
        return judge(r, {1, 3}, also=lambda: None if ("hex digits" in r.text or "leaves the shard directory" in r.text)
                     else "the hostile name was not refused as such")
    probe(f"trust-data-verify-{_name}", f"data verify on a shard set whose index.json has {_name}")(_manifest)


@probe("trust-data-verify-s3-sha-out", "data verify s3://b/ds whose remote index.json sha256 is ../../x/pwned", s3=True)
def _(t, env):
    import boto3

    from torchport.data.pack import pack_splits
    from torchport.storage import store

    url = f"s3://{S3.bucket()}/ds"
    old = dict(os.environ)
    os.environ.update(env)
    try:
        store._CLIENTS.clear()
        pack_splits(folder(t / "src"), url, mode="predecoded", workers=1, size=32)
    finally:
        os.environ.clear()
        os.environ.update(old)
    s3 = boto3.client("s3", endpoint_url=S3.url, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    bucket = url.split("/")[2]
    doc = json.loads(s3.get_object(Bucket=bucket, Key="ds/train/index.json")["Body"].read())
    doc["index"]["sha256"] = "../../../x/pwned"
    s3.put_object(Bucket=bucket, Key="ds/train/index.json", Body=json.dumps(doc).encode())
    cache = t / "cache" / "c"
    r = tp("data", "verify", f"{url}/train", cwd=t, env={**env, "TORCHPORT_STORAGE_CACHE": str(cache)})
    written = [str(p) for p in t.rglob("pwned")]
    return judge(r, {1, 3}, also=lambda: f"wrote outside the cache: {written}" if written else
                 (None if "hex digits" in r.text else "not refused as a hostile name"))


_SECRET = "s3cr3tpassw0rd"
for _args in (("doctor",), ("doctor", "--json", "-"), ("doctor", "--store", "s3://b/x")):
    def _doctor(t, args=_args):
        env = {**ENV, "AWS_ENDPOINT_URL": f"http://user:{_SECRET}@127.0.0.1:9", "AWS_ACCESS_KEY_ID": "AKIAABCDEFGHIJKLMNOP",
               "AWS_SECRET_ACCESS_KEY": "another-secret-v4lue", "TORCHPORT_STORAGE_TIMEOUT_S": "1"}
        r = tp(*args, cwd=t, env=env)
        leaked = [s for s in (_SECRET, "AKIAABCDEFGHIJKLMNOP", "another-secret-v4lue") if s in r.text]
        return judge(r, {0, 1}, also=lambda: f"printed {leaked}" if leaked else None)
    probe(f"trust-secret-{'-'.join(a.strip('-') for a in _args[1:2]) or 'doctor'}",
          f"torchport {' '.join(_args)} with credentials in AWS_ENDPOINT_URL and the key variables")(_doctor)


@probe("trust-scan-csv-formula", "scan --output-format csv on a file named =HYPERLINK(...)+1.py")
def _(t):
    (t / "=HYPERLINK(1)+1.py").write_text(CUDA)
    r = tp("scan", ".", "--output-format", "csv", cwd=t)
    bad = [ln for ln in r.out.splitlines()[1:] if ln.lstrip('"').startswith(("=", "+", "-", "@"))]
    return judge(r, {1}, also=lambda: f"formula cell: {bad[0][:60]}" if bad else None)


@probe("trust-scan-sarif-uri", "scan --output-format sarif on 'with space.py': artifactLocation.uri a URI reference")
def _(t):
    (t / "with space.py").write_text(CUDA)
    r = tp("scan", ".", "--output-format", "sarif", cwd=t)

    def uri():
        uris = [x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                for x in json.loads(r.out)["runs"][0]["results"]]
        return None if uris and all(" " not in u for u in uris) else f"raw uri {uris[:1]}"
    return judge(r, {1}, also=uri)


# -- paths confined to their directory (issue 36 item 6) ----------------------------------------------------
@probe("trust-fix-write-symlink-out", "fix --write on a tree holding a symlink to a .py outside it")
def _(t):
    (t / "tree").mkdir()
    (t / "elsewhere").mkdir()
    (t / "elsewhere" / "victim.py").write_text(CUDA)
    (t / "tree" / "own.py").write_text(CUDA)
    (t / "tree" / "link.py").symlink_to(t / "elsewhere" / "victim.py")
    r = tp("fix", "tree", "--write", "--jobs", "1", cwd=t)
    return judge(r, {6}, prefer="outside the tree",
                 also=lambda: "wrote outside the tree" if (t / "elsewhere" / "victim.py").read_text() != CUDA else
                 (None if "outside the tree" in r.text else "the link out was not named"))


_ANALYSE = """import json, os, sys
import torchport.emulate as emulate
emulate.install()
import torch_npu
try:
    torch_npu.profiler.profiler.analyse(sys.argv[1])
except RuntimeError as exc:
    print("error:", exc)
    sys.exit(6)
"""
for _form in ("output-symlink", "result-folder-symlink", "trace-symlink"):
    def _analyse(t, form=_form):
        trace = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})
        prof, outside = t / "prof", t / "outside"
        outside.mkdir()
        prof.mkdir()
        if form == "result-folder-symlink":
            (outside / "w.pt.trace.json").write_text(trace)
            (prof / "w_ascend_pt").symlink_to(outside, target_is_directory=True)
        else:
            (prof / "w_ascend_pt").mkdir()
            if form == "trace-symlink":
                (outside / "secret.pt.trace.json").write_text(trace)
                (prof / "w_ascend_pt" / "w.pt.trace.json").symlink_to(outside / "secret.pt.trace.json")
            else:
                (prof / "w_ascend_pt" / "w.pt.trace.json").write_text(trace)
                (prof / "w_ascend_pt" / "ASCEND_PROFILER_OUTPUT").symlink_to(outside, target_is_directory=True)
        p = subprocess.run([PY, "-c", _ANALYSE, str(prof)], cwd=t, env=ENV, capture_output=True, text=True, timeout=120)
        r = Res(p.returncode, p.stdout, p.stderr)
        wrote = [x.name for x in outside.rglob("*") if x.suffix in (".csv",) or x.name == "trace_view.json"]
        return judge(r, {6}, also=lambda: f"wrote outside: {wrote}" if wrote else
                     (None if "symlink" in r.text else "not refused as a link out"))
    probe(f"trust-profiler-analyse-{_form}", f"emulated torch_npu.profiler analyse with a {_form} leading outside")(_analyse)


def _recorded_reference(t: Path) -> Path:
    from torchport.checks import parity
    from torchport.runtime.device import select_device
    from checks_targets import healthy  # noqa: F401 - tests/checks on sys.path below

    ref = t / "refs" / "ref.json"
    ref.parent.mkdir()
    parity(healthy(), device=select_device("cpu", warn=False), record=ref, steps=2)
    return ref


for _kind in ("init", "trace"):
    for _form in ("dotdot", "absolute", "symlink-out"):
        def _ref(t, kind=_kind, form=_form):
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "checks"))
            ref = _recorded_reference(t)
            outside = t / f"outside.{kind}.pt"
            shutil.copy(ref.parent / f"ref.{kind}.pt", outside)
            doc = json.loads(ref.read_text())
            doc["files"][kind] = {"dotdot": f"../outside.{kind}.pt", "absolute": str(outside),
                                  "symlink-out": f"link.{kind}.pt"}[form]
            if form == "symlink-out":
                (ref.parent / f"link.{kind}.pt").symlink_to(outside)
            (ref.parent / f"ref.{kind}.pt").unlink()      # only the hostile name leads to a file
            ref.write_text(json.dumps(doc))
            r = tp("check", "--only", "parity", "--device", "cpu", "--reference", ref, cwd=t)
            return judge(r, {5}, also=lambda: None if f"files.{kind}" in r.text else "the hostile name was not refused")
        probe(f"trust-parity-{_kind}-{_form}", f"check --only parity --reference whose files.{_kind} is {_form}")(_ref)


for _opt in ("--run-dir", "--checkpoint-dir"):
    def _broad(t, opt=_opt):
        home = t / "home"
        home.mkdir()
        folder(t / "data", per_class=4)
        r = tp("train", "--data", t / "data", *TINY, opt, home, "--device", "cpu", cwd=t,
               extra_env={"HOME": str(home)})
        return judge(r, {2}, also=lambda: f"wrote into the home folder: {[x.name for x in home.iterdir()]}"
                     if any(home.iterdir()) else None)
    probe(f"trust-train{_opt.replace('--', '-')}-home", f"train {_opt} $HOME (the home folder as a run's own folder)")(_broad)


# -- JSON / TOML / YAML from elsewhere: depth limits, plain data only (issue 36 item 6) ------------------------
_DEEP = "[" * 100_000 + "]" * 100_000
_DEEP_YAML = "a: " + "[" * 5000 + "]" * 5000 + "\n"
_PARSE = {
    "data-inspect-deep-index": ({"ds/index.json": _DEEP}, ("data", "inspect", "ds"), {1, 3}),
    "data-verify-deep-index": ({"ds/index.json": _DEEP}, ("data", "verify", "ds"), {1, 3}),
    "profile-config-deep-yaml": ({"c.yaml": _DEEP_YAML}, ("profile", "--config", "c.yaml", "--steps", "1"), {2}),
    "profile-config-deep-json": ({"c.json": _DEEP}, ("profile", "--config", "c.json", "--steps", "1"), {2}),
    "profile-config-python-tag": ({"c.yaml": "model: !!python/object/apply:os.system ['touch ran']\n"},
                                  ("profile", "--config", "c.yaml", "--steps", "1"), {2}),
    "bench-compare-deep": ({"a.json": _DEEP}, ("bench", "compare", "a.json", "a.json"), {2}),
    "scan-deep-pyproject": ({"pyproject.toml": "[tool.torchport]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "a.py": CUDA},
                            ("scan", "a.py"), {2}),
    "check-reference-deep": ({"ref.json": '{"format": "x", "n": ' + _DEEP + "}"},
                             ("check", "--only", "parity", "--device", "cpu", "--reference", "ref.json"), {5}),
    "train-config-deep-yaml": ({"c.yaml": "model: tinycnn\nx: " + "[" * 5000 + "]" * 5000 + "\n"},
                               ("train", "--config", "c.yaml", "--device", "cpu", "--epochs", "1"), {2}),
}
for _name, (_files, _args, _codes) in _PARSE.items():
    def _parse(t, files=_files, args=_args, codes=_codes):
        for rel, text in files.items():
            (t / rel).parent.mkdir(parents=True, exist_ok=True)
            (t / rel).write_text(text)
        r = tp(*args, cwd=t)
        return judge(r, codes, also=lambda: "the planted tag RAN" if (t / "ran").exists() else None)
    probe(f"trust-parse-{_name}", f"torchport {' '.join(_args[:2])} on {', '.join(_files)} ({_name})")(_parse)


# -- the rest of issue 36: run-dir secrets, names on the terminal, data set links, per-rank lines ------------
@probe("trust-train-run-dir-secret", "train --storage-endpoint http://KEYID:pw@host with AWS_SECRET_ACCESS_KEY set: "
       "grep every byte of the run dir (config.yaml, metrics, CSVs, checkpoints)")
def _(t):
    folder(t / "data", per_class=4)
    secrets = ("AKIAQWERTYUIOPASDFGH", "pw-S3CRETpw", "env-secret-wJalrXUtnFEMI")
    r = tp("train", "--data", t / "data", *TINY, "--max-steps", "2", "--device", "cpu", "--run-dir", t / "run",
           "--storage-endpoint", f"http://{secrets[0]}:{secrets[1]}@127.0.0.1:9/{secrets[2]}", cwd=t,
           extra_env={"AWS_SECRET_ACCESS_KEY": secrets[2], "TORCHPORT_STORAGE_TIMEOUT_S": "1"})
    leaked = sorted({p.relative_to(t / "run").as_posix() for p in (t / "run").rglob("*") if p.is_file()
                     for x in secrets if x.encode() in p.read_bytes()} | ({"(output)"} if any(x in r.text for x in secrets)
                                                                           else set()))
    return judge(r, {0}, also=lambda: f"credentials written to {leaked}" if leaked else None)


_HOSTILE_NAME = "cls\x1b]0;pwned\x07\x1b[31m\nFAKE LINE"
for _verb in ("inspect", "pack"):
    def _names(t, verb=_verb):
        src = folder(t / "src", classes=2, per_class=4) / "train"
        first = sorted(p for p in src.iterdir() if p.is_dir())[0]
        first.rename(src / _HOSTILE_NAME)
        (src / _HOSTILE_NAME / "bad\x1b[2J\nfile.jpg").write_bytes(b"not a jpeg")
        r = tp("data", "pack", src, "sh", "--workers", "1", cwd=t)
        if verb == "inspect" and r.code == 0:
            r = tp("data", "inspect", "sh", cwd=t)
        raw = [c for c in ("\x1b", "\x07") if c in r.text]
        return judge(r, {0}, also=lambda: f"raw control characters printed: {raw}" if raw else
                     (None if "FAKE LINE" not in "".join(ln for ln in r.text.splitlines() if not ln.startswith(" ")
                                                         and "\\x0a" not in ln) else "a name started a line of its own"))
    probe(f"trust-data-{_verb}-escape-name", f"data {_verb}: a class folder / file named with OSC, ANSI and a newline")(_names)


for _form in ("loop-class", "loop-in-class", "class-out", "image-out"):
    def _links(t, form=_form):
        src = folder(t / "src", classes=2, per_class=4) / "train"
        a = sorted(p for p in src.iterdir() if p.is_dir())[0]
        (t / "elsewhere").mkdir()
        import numpy as np
        from PIL import Image

        Image.fromarray(np.random.default_rng(7).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(t / "elsewhere" / "private.jpg")
        {"loop-class": lambda: os.symlink(src, src / "back"), "loop-in-class": lambda: os.symlink(a, a / "again"),
         "class-out": lambda: os.symlink(t / "elsewhere", src / "outcls"),
         "image-out": lambda: os.symlink(t / "elsewhere" / "private.jpg", a / "private.jpg")}[form]()
        r = tp("data", "pack", src, "sh", "--workers", "1", "--no-restart-markers", "--json", "p.json", cwd=t, timeout=120)

        def why():
            if r.code != 0:
                return None
            rep = json.loads((t / "p.json").read_text())["all"]
            packed = b"".join(p.read_bytes() for p in (t / "sh").glob("*.tps"))
            if (t / "elsewhere" / "private.jpg").read_bytes() in packed:
                return "a file from outside the data set was packed"
            if rep["written"] != 8:
                return f"{rep['written']} written, expected the 8 real images"
            return None if r.text.count("symbolic link") == 1 else "the link was not reported in one line"
        return judge(r, {0}, also=why)
    probe(f"trust-pack-symlink-{_form}", f"data pack on an ImageFolder with a symlink ({_form})")(_links)


@probe("trust-rank-no-rendezvous", "train with WORLD_SIZE=2 RANK=1 but no MASTER_ADDR/PORT (a rank not started by torchrun)")
def _(t):
    env = {k: v for k, v in ENV.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    r = tp("train", "--data", t / "none", "--device", "cpu", cwd=t, env={**env, "WORLD_SIZE": "2", "RANK": "1"})
    return judge(r, {2}, also=lambda: None if "error: rank 1: " in r.text else "the error line does not name the rank")


# -- the sharded (FSDP/DCP) path's faults (issue 36, item 5): one line for the run, a documented code, the last
# committed checkpoint kept and picked by --resume auto. Two ranks (gloo on cpu), started as torchrun would.
FAULT_TRAIN = Path(__file__).resolve().parents[1] / "tests" / "train" / "fault_train.py"
SHARDED = ["--model", "tinycnn", "--image-size", "16", "--batch-size", "4", "--workers", "0", "--progress", "plain",
           "--no-tensorboard", "--log-every", "1", "--device", "cpu", "--strategy", "fsdp", "--checkpoint-every", "1"]


def ranks(args, *, cwd, env=None, world=2, timeout=240, extra_env=None, wrap=()) -> tuple[Res, list[int]]:
    """``torchport train ARGS`` (through tests/train/fault_train.py: TORCHPORT_FAULT_* faults) as ``world`` ranks
    with torchrun's variables; ``(both ranks' output as one Res whose code is the run's, [each rank's code])``.
    The run's code: the first non-zero code of a rank that was not killed by the fault itself (3)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        e = {**(env or ENV), **(extra_env or {}), "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(world),
             "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
             "TORCHPORT_COLLECTIVE_TIMEOUT_S": "30"}
        procs.append(subprocess.Popen([*wrap, PY, str(FAULT_TRAIN), *map(str, args)], cwd=cwd, env=e, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs, codes = [], []
    deadline = time.time() + timeout
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            p.returncode = 124
        outs.append((o, e))
        codes.append(p.returncode)
    run_code = next((c for c in codes if c not in (0, 3)), 3 if 3 in codes else 0)
    return Res(run_code, "".join(o for o, _ in outs), "".join(e for _, e in outs)), codes


def one_line(r: Res) -> str | None:
    """None when the run printed exactly one ``error:`` line (the ranks together), else why not."""
    lines = [ln for ln in r.text.splitlines() if "error:" in ln]
    return None if len(lines) == 1 else f"{len(lines)} error lines for the run"


def auto_resumes_from(t: Path, ck, want: str, env=None) -> tuple[str | None, Res]:
    """``--resume auto`` (2 ranks, one more epoch): None when it resumed from ``want`` and finished, else why not."""
    r, _ = ranks(["--data", t / "data", *SHARDED, "--epochs", "2", "--run-dir", t / "run", "--checkpoint-dir", ck,
                  "--resume", "auto"], cwd=t, env=env)
    if r.code != 0:
        return f"--resume auto then failed (exit {r.code}: {seen(r)})", r
    if f"resumed from {ck}/{want}" not in r.text:
        got = next((ln for ln in r.text.splitlines() if "resumed from" in ln), "no 'resumed from' line")
        return f"--resume auto did not pick {want} ({got.strip()[:80]})", r
    return None, r


def sharded_run(t: Path, ck, extra_env=None, env=None) -> tuple[Res, list[int]]:
    """The faulty run: 1 epoch of 3 steps (2 ranks x batch 4 over 24 images), a checkpoint after every step."""
    if not (t / "data").exists():
        folder(t / "data", per_class=8)
    return ranks(["--data", t / "data", *SHARDED, "--epochs", "1", "--run-dir", t / "run", "--checkpoint-dir", ck],
                 cwd=t, env=env, extra_env=extra_env)


def sharded_judge(r: Res, codes, ok_codes, t: Path, ck, want: str, env=None, before=None) -> tuple[str, str]:
    """One ``error:`` line for the run, a documented exit code, then ``--resume auto`` picks ``want``."""
    def also():
        why = one_line(r) or (before() if before else None)
        if why:
            return why
        why, _ = auto_resumes_from(t, ck, want, env)
        return why
    verdict, saw = judge(r, ok_codes, also=also)
    return verdict, f"{saw} (ranks exit {codes})"


class Proxy:
    """A TCP forwarder 127.0.0.1:port -> 127.0.0.1:target in its own process: killing it is the endpoint dying
    (the S3 server behind it keeps its objects, so the endpoint can come back)."""

    CODE = r'''
import socket, sys, threading
port, target = int(sys.argv[1]), int(sys.argv[2])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("127.0.0.1", port)); srv.listen(64)
def pipe(a, b):
    try:
        while (d := a.recv(65536)):
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
while True:
    c, _ = srv.accept()
    u = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
'''

    def __init__(self, target_url: str) -> None:
        self.target = int(target_url.rsplit(":", 1)[1])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([PY, "-c", self.CODE, str(self.port), str(self.target)])
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)


@probe("sharded-s3-endpoint-dies-mid-save", "2-rank fsdp run, checkpoints in s3://; the endpoint dies before the "
       "step-2 save; then --resume auto once it is back", s3=True)
def _(t, env):
    proxy = Proxy(S3.url)
    try:
        env = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}"}
        ck = f"s3://{S3.bucket()}/ck"
        r, codes = sharded_run(t, ck, env=env, extra_env={"TORCHPORT_FAULT_KILL_PID": f"0:2:{proxy.proc.pid}"})
        proxy.proc.wait(10)
        proxy.start()                          # the endpoint is back: the step-1 checkpoint must still be there
        return sharded_judge(r, codes, {5, 6}, t, ck, "step-000000001", env=env)
    finally:
        proxy.stop()


@probe("sharded-disk-full-mid-save", "2-rank fsdp run, --checkpoint-dir on a 24 MiB tmpfs that fills up before the "
       "step-2 save; then --resume auto with space freed")
def _(t):
    ck = t / "ck"
    ck.mkdir()
    with tmpfs(ck, "24m") as ok:
        if not ok:
            return "skip: cannot mount a tmpfs here (needs root)", ""
        filler = ck / "filler"
        r, codes = sharded_run(t, ck, extra_env={"TORCHPORT_FAULT_FILL": f"0:2:{filler}"})
        filler.unlink(missing_ok=True)
        return sharded_judge(r, codes, {5}, t, ck, "step-000000001",
                             before=lambda: None if "disk is full" in r.text else "the full disk was not named")


@probe("sharded-rank-killed-mid-save", "2-rank fsdp run; rank 1 dies inside its step-2 shard write; then --resume auto")
def _(t):
    ck = t / "ck"
    r, codes = sharded_run(t, ck, extra_env={"TORCHPORT_FAULT_DIE_IN_SAVE": "1:2"})
    return sharded_judge(r, codes, {8}, t, ck, "step-000000001")


def _sharded_done(t: Path) -> Path:
    """A finished 2-rank run's checkpoint dir (step-1..3, latest step-3)."""
    ck = t / "ck"
    r, codes = sharded_run(t, ck)
    if r.code != 0:
        raise RuntimeError(f"the clean 2-rank run failed: {codes} {seen(r)}")
    return ck


def _garble(f: Path, at: float = 0.5) -> None:
    data = bytearray(f.read_bytes())
    i = int(len(data) * at)
    data[i:i + 64] = bytes(b ^ 0x5A for b in data[i:i + 64])
    f.write_bytes(bytes(data))


_SHARD_FAULTS = {
    "missing-shard": lambda p: (p / "__1_0.distcp").unlink(),
    "garbled-shard": lambda p: _garble(p / "__1_0.distcp"),
    "empty-metadata": lambda p: (p / ".metadata").write_bytes(b""),
    "truncated-metadata": lambda p: (p / ".metadata").write_bytes((p / ".metadata").read_bytes()[:100]),
    "garbled-metadata": lambda p: _garble(p / ".metadata", 0.3),
}
# A garbled shard under a re-sealed manifest is not a fault form: its bytes are tensor data that still parse, and
# with the manifest rewritten to match there is nothing left to compare them with (no code runs either way).
for _form, _damage in _SHARD_FAULTS.items():
    for _sealed in (False, True) if _form != "garbled-shard" else (False,):
        def _resume_auto(t, damage=_damage, sealed=_sealed):
            """The latest checkpoint damaged (manifest re-sealed or not): --resume auto falls back to the one before,
            an explicit --resume of it is one line (exit 5) for the run, and so is convert."""
            ck = _sharded_done(t)
            latest = ck / "step-000000003"
            damage(latest)
            if sealed:
                _hostile().reseal(latest)
            explicit, codes = ranks(["--data", t / "data", *SHARDED, "--epochs", "2", "--run-dir", t / "run2",
                                     "--resume", latest], cwd=t)
            conv = subprocess.run([PY, "-m", "torchport.train.convert", str(latest), str(t / "out.pt")], cwd=t,
                                  env=ENV, capture_output=True, text=True, timeout=300)
            conv = Res(conv.returncode, conv.stdout, conv.stderr)

            def before():
                if (why := one_line(explicit)) is not None:
                    return f"--resume DIR: {why}"
                if (why := clean(conv)) is not None or conv.code != 5 or (why := one_line(conv)) is not None:
                    return f"convert: {why or f'exit {conv.code}'} ({seen(conv)})"
                return None
            verdict, saw = sharded_judge(explicit, codes, {5}, t, ck, "step-000000002", before=before)
            return verdict, f"{saw}; convert [exit {conv.code}] {seen(conv)}"
        probe(f"sharded-{_form}{'-resealed' if _sealed else ''}",
              f"2-rank fsdp run's latest checkpoint with a {_form}{' (manifest re-sealed)' if _sealed else ''}: "
              "--resume DIR, convert, --resume auto")(_resume_auto)


# ------------------------------------------------------------------------------------------------ runner
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", action="append", default=[], help="run probes whose name contains this (repeatable)")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--list", action="store_true", help="list the probes and exit")
    args = ap.parse_args(argv)
    chosen = [p for p in PROBES if not args.k or any(k in p[0] for k in args.k)]
    if args.list:
        for name, what, _fn in chosen:
            print(f"{name:34} {what}")
        return 0
    rows = []
    try:
        for name, what, fn in chosen:
            t0 = time.time()
            tmp = Path(tempfile.mkdtemp(prefix=f"probe-{name}-"))
            try:
                verdict, saw = fn(tmp)
            except Exception as exc:  # noqa: BLE001 - a probe's own bug is reported, the battery goes on
                verdict, saw = f"FAIL: probe error {type(exc).__name__}: {exc}"[:150], ""
            finally:
                subprocess.run(["umount", "-l", *map(str, tmp.glob("*"))], capture_output=True) if os.geteuid() == 0 else None
                shutil.rmtree(tmp, ignore_errors=True)
            rows.append({"probe": name, "input": what, "verdict": verdict, "saw": saw, "seconds": round(time.time() - t0, 1)})
            print(f"{name:34} {verdict:12.60} {saw}", file=sys.stderr, flush=True)
    finally:
        S3.stop()
    print(f"\n| probe | verdict | what the user saw |\n|---|---|---|")
    for r in rows:
        print(f"| {r['probe']} | {r['verdict']} | {r['saw'].replace('|', '/')} |")
    failed = [r for r in rows if r["verdict"].startswith("FAIL")]
    skipped = [r for r in rows if r["verdict"].startswith("skip")]
    print(f"\n{len(rows)} probe(s): {len(rows) - len(failed) - len(skipped)} ok, {len(failed)} failed, {len(skipped)} skipped")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
