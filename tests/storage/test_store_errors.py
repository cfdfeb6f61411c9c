"""Object-store failures told apart, each with its own fix, and found before work that would be lost (issue 24 #2),
and the one-writer lease for a checkpoint prefix (issue 24 #5) -- against the real S3 server (moto)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bad_inputs import bad_input
from torchport.cli.main import app
from torchport.errors import ExitCode, StorageError

TINY = ["--model", "tinycnn", "--image-size", "32", "--batch-size", "8", "--warmup-epochs", "0", "--progress", "plain",
        "--epochs", "1", "--log-every", "1", "--workers", "0", "--device", "cpu"]


def _message(fn) -> str:
    with pytest.raises(StorageError) as exc:
        fn()
    assert "\n" not in str(exc.value)
    return str(exc.value)


def test_missing_bucket_and_missing_key_have_different_fixes(store_env):
    from torchport.storage import store

    no_bucket = _message(lambda: store.read_bytes("s3://no-such-bucket-tp/x"))
    assert "bucket no-such-bucket-tp does not exist" in no_bucket and "aws s3 mb s3://no-such-bucket-tp" in no_bucket
    no_key = _message(lambda: store.read_bytes(f"{store_env}/missing.bin"))
    assert "no object at that key" in no_key and "bucket" not in no_key.split(";")[0] and "does not exist" in no_key
    # "does the object exist?" must not answer "no" for a bucket that is not there
    assert store.exists(f"{store_env}/missing.bin") is False
    assert "does not exist" in _message(lambda: store.exists("s3://no-such-bucket-tp/x"))
    assert "does not exist" in _message(lambda: store.listdir("s3://no-such-bucket-tp/"))
    assert store.check_bucket(f"{store_env}/x").startswith("bucket ")
    assert "does not exist" in _message(lambda: store.check_bucket("s3://no-such-bucket-tp/x"))


def test_denied_and_unreachable(store_env, monkeypatch):
    from botocore.exceptions import ClientError

    from torchport.storage import store

    def denied():
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetObject")

    assert store.classify(FileNotFoundError("x")) == "missing"
    msg = _message(lambda: store.call(denied, f"{store_env}/k", what="read"))
    assert "denied" in msg and "AWS_ACCESS_KEY_ID" in msg
    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("TORCHPORT_STORAGE_RETRIES", "1")
    store._CLIENTS.clear()
    msg = _message(lambda: store.check_bucket("s3://any-bucket/x"))
    assert "cannot reach the object store" in msg and f"127.0.0.1:{port}" in msg


def test_doctor_store_fails_for_a_missing_bucket(store_env, s3_server):
    res = CliRunner().invoke(app, ["doctor", "--store", "s3://no-such-bucket/x"], env={"COLUMNS": "400"})
    bad_input("doctor-store-missing-bucket", "doctor --store naming a bucket that does not exist",
              "torchport doctor --store s3://no-such-bucket/x", res.exit_code, res.output, expect_code=ExitCode.FAILED,
              tmp=s3_server, contains="[store-bucket] bucket no-such-bucket does not exist")
    assert "listable" not in res.output and "fix: create it" in res.output
    ok = CliRunner().invoke(app, ["doctor", "--store", f"{store_env}/prefix", "--json", "-"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["store"]["listable"] is True


def test_pack_to_a_missing_bucket_fails_before_packing(store_env, s3_server, tmp_path, monkeypatch):
    import importlib

    from torchport.data.synth import make_dataset

    pack_mod = importlib.import_module("torchport.data.pack")   # (torchport.data.pack is also a function name)

    make_dataset(tmp_path / "src", classes=2, train_per_class=3, val_per_class=1, size=16)
    called = []
    monkeypatch.setattr(pack_mod, "pack", lambda *a, **k: called.append(a))
    res = CliRunner().invoke(app, ["data", "pack", str(tmp_path / "src"), "s3://no-such-bucket/shards"])
    bad_input("pack-missing-bucket", "data pack to a bucket that does not exist",
              "torchport data pack SRC s3://no-such-bucket/shards", res.exit_code, res.output,
              expect_code=ExitCode.IO, tmp=(tmp_path, s3_server), contains="bucket no-such-bucket does not exist")
    assert called == []     # nothing was packed first


def test_checkpoint_dir_in_a_missing_bucket_is_refused_before_training(store_env, s3_server, tmp_path, child_env):
    from torchport.data.synth import make_dataset

    make_dataset(tmp_path / "data", classes=2, train_per_class=8, val_per_class=2, size=32)
    out = subprocess.run([sys.executable, "-m", "torchport.train", "--data", str(tmp_path / "data"), *TINY,
                          "--run-dir", str(tmp_path / "run"), "--checkpoint-dir", "s3://no-such-bucket/ckpt"],
                         env={**child_env, "TORCHPORT_CACHE": str(tmp_path / "cache")}, capture_output=True, text=True,
                         timeout=300)
    bad_input("train-checkpoint-dir-missing-bucket", "--checkpoint-dir in a bucket that does not exist",
              "torchport train --checkpoint-dir s3://no-such-bucket/ckpt", out.returncode, out.stderr,
              expect_code=ExitCode.IO, tmp=(tmp_path, s3_server), contains="bucket no-such-bucket does not exist")
    assert "epoch 1/1" not in out.stdout and "step" not in out.stdout    # refused before the first step


def test_lease_admits_exactly_one_writer(store_env):
    from torchport.storage import store
    from torchport.train import lock

    url = f"{store_env}/race"
    results = []
    barrier = threading.Barrier(4)

    def create(i):
        barrier.wait()
        results.append(store.create_exclusive(url, str(i).encode()))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]

    prefix = f"{store_env}/ckpt"
    lock.acquire(prefix)
    lease = f"{prefix}/{lock.LEASE_NAME}"
    try:
        assert json.loads(store.read_bytes(lease))["pid"] == os.getpid()
        lock.acquire(prefix)                                  # re-entrant in the same process
    finally:
        lock.release_all()
    assert not store.exists(lease)                           # released: the lease object is gone

    # another host's live lease: refused, naming the holder and how to clear it
    store.write_bytes(lease, json.dumps({"pid": 1, "host": "other-node", "started": "then"}).encode())
    with pytest.raises(lock.RunLockedError) as exc:
        lock.acquire(prefix)
    assert "pid 1 on other-node" in str(exc.value) and f"aws s3 rm {lease}" in str(exc.value)
    assert exc.value.exit_code == ExitCode.BUSY
    # a lease whose writer is gone is taken over: its pid is dead on this host, or it was not renewed in time
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    expired = {"pid": 1, "host": "other-node", "ttl_s": 0.5}
    for owner in ({"pid": int(dead.stdout), "host": socket.gethostname()}, expired):
        store.write_bytes(lease, json.dumps(owner).encode())
        if owner is expired:
            time.sleep(1.5)          # (S3 timestamps have 1 s resolution)
        lock.acquire(prefix)
        try:
            assert json.loads(store.read_bytes(lease))["pid"] == os.getpid()
        finally:
            lock.release_all()
        assert not store.exists(lease)


def test_the_holder_renews_its_lease(store_env, monkeypatch):
    from torchport.storage import store
    from torchport.train import lock

    monkeypatch.setenv("TORCHPORT_LEASE_TTL_S", "3")
    prefix = f"{store_env}/renewed"
    lease = f"{prefix}/{lock.LEASE_NAME}"
    lock.acquire(prefix)
    try:
        first = store.info(lease)["LastModified"]
        time.sleep(3.5)   # > TTL: without renewal a second trainer would take it over now
        assert store.info(lease)["LastModified"] > first
        with pytest.raises(lock.RunLockedError):
            lock._acquire_store(prefix)      # another trainer (same code path, not re-entrant) is refused
    finally:
        lock.release_all()


def test_second_trainer_on_a_store_checkpoint_dir_refuses(store_env, s3_server, tmp_path, child_env):
    from torchport.storage import store
    from torchport.train import lock

    prefix = f"{store_env}/ckpt"
    store.write_bytes(f"{prefix}/{lock.LEASE_NAME}",
                      json.dumps({"pid": 4242, "host": "node-7", "started": "2026-01-01 00:00:00"}).encode())
    out = subprocess.run([sys.executable, "-m", "torchport.train", *TINY, "--run-dir", str(tmp_path / "run"),
                          "--checkpoint-dir", prefix],
                         env={**child_env, "TORCHPORT_CACHE": str(tmp_path / "cache")}, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == ExitCode.BUSY, out.stderr
    assert "in use by another trainer (pid 4242 on node-7" in out.stderr and "Traceback" not in out.stderr
    assert not Path(tmp_path / "run" / "metrics.jsonl").exists() or "step" not in Path(
        tmp_path / "run" / "metrics.jsonl").read_text()
