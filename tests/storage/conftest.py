"""A real S3-compatible HTTP server (moto's standalone server) on 127.0.0.1 for the storage tests.

As s3fs's own test suite does: ``python -m moto.server`` in a subprocess, one per test session;
each test gets its own bucket and its own block-cache directory, and talks to the server through
torchport's production code path (environment variables, s3fs, retries) -- nothing is mocked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    """``http://127.0.0.1:PORT`` of a running moto server (killed at the end of the session)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            break
        except Exception:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("moto server did not start (pip install 'moto[server]')")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def store_env(s3_server, tmp_path, monkeypatch):
    """Environment pointing torchport at the moto server, with a fresh bucket and cache; returns the bucket URL."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    for var in ("TORCHPORT_STORAGE_ENDPOINT", "TORCHPORT_OBS_ENDPOINT", "OBS_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
                "TORCHPORT_STORAGE_RETRIES", "TORCHPORT_STORAGE_BLOCK_MB", "TORCHPORT_STORAGE_ADDRESSING", "OBS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TORCHPORT_STORAGE_CACHE", str(tmp_path / "objcache"))
    monkeypatch.setenv("TORCHPORT_STORAGE_BACKOFF_S", "0.01")
    monkeypatch.setenv("TORCHPORT_STORAGE_TIMEOUT_S", "5")
    import boto3

    bucket = "tp-" + uuid.uuid4().hex[:12]
    boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1").create_bucket(Bucket=bucket)
    from torchport.storage import store

    store._CLIENTS.clear()
    yield f"s3://{bucket}"
    store._CLIENTS.clear()


@pytest.fixture
def child_env():
    """The current environment as a dict (for subprocesses: torchrun, the CLI)."""
    return dict(os.environ)
