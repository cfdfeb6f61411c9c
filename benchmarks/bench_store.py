"""Object store vs local disk, same run: starts moto's S3 server on 127.0.0.1, packs the benchmark photos
(jpeg shards) into it, then runs ``torchport data bench --data s3://...`` (cold / warm / 10% faults).

    .venv/bin/python benchmarks/bench_store.py --count 512 --workers 2 --rounds 3 --json store.json
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--mode", default="jpeg")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
                break
            except Exception:
                time.sleep(0.2)
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": url}
        os.environ.update(env)
        import boto3

        boto3.client("s3", endpoint_url=url, region_name="us-east-1").create_bucket(Bucket="bench")
        from torchport.data.pack import pack
        from torchport.data.photos import photos_cache

        t0 = time.time()
        pack(photos_cache(a.count), f"s3://bench/photos-{a.mode}", mode=a.mode, workers=a.workers, shard_bytes=8 << 20)
        print(f"packed {a.count} photos to s3://bench/photos-{a.mode} in {time.time() - t0:.1f}s", flush=True)
        cmd = [sys.executable, "-m", "torchport", "data", "bench", "--data", f"s3://bench/photos-{a.mode}",
               "--workers", str(a.workers), "--rounds", str(a.rounds), "--batch-size", str(a.batch_size),
               "--size", str(a.image_size)] + (["--json", a.json] if a.json else [])
        return subprocess.call(cmd, env=env)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    raise SystemExit(main())
