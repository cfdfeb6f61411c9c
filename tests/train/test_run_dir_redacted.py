"""Issue 36 item 3: secrets never leave the process through the run directory.

``torchport train`` writes ``config.yaml``, ``metrics.jsonl`` (its ``start`` record holds the whole config), the
steps/epochs CSVs, ``summary.json`` and checkpoints (whose ``config`` entry is the run's config): an endpoint
URL with credentials (``--storage-endpoint http://KEYID:SECRET@host``) and the values of the credential
environment variables must not appear in any byte of any of them -- the endpoint itself (host:port) stays.
"""

from __future__ import annotations

from pathlib import Path

import torch
from typer.testing import CliRunner

from torchport.cli.main import app

KEY_ID, PASSWORD, ENV_SECRET = "AKIAQWERTYUIOPASDFGH", "pw-S3CRETpw", "env-secret-wJalrXUtnFEMI"
TINY = ["--model", "tinycnn", "--image-size", "32", "--batch-size", "16", "--epochs", "1", "--workers", "0",
        "--progress", "none", "--max-steps", "2", "--no-tensorboard", "--checkpoint-every", "1"]


def test_no_file_of_the_run_dir_holds_a_credential(tmp_path, tiny_data, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ENV_SECRET)
    monkeypatch.setenv("TORCHPORT_STORAGE_TIMEOUT_S", "1")
    run = tmp_path / "run"
    endpoint = f"http://{KEY_ID}:{PASSWORD}@127.0.0.1:9/{ENV_SECRET}"
    res = CliRunner().invoke(app, ["train", "--data", str(tiny_data), *TINY, "--run-dir", str(run),
                                   "--storage-endpoint", endpoint])
    assert res.exit_code == 0, res.output[-3000:]
    files = sorted(p for p in run.rglob("*") if p.is_file())
    names = {p.relative_to(run).as_posix() for p in files}
    assert {"config.yaml", "metrics.jsonl", "steps.csv"} <= names, names
    assert any(n.startswith("checkpoints/") for n in names), names
    leaked = sorted((p.relative_to(run).as_posix(), s) for p in files for s in (KEY_ID, PASSWORD, ENV_SECRET)
                    if s.encode() in p.read_bytes())
    assert not leaked, f"credentials written to the run dir: {leaked}"
    for s in (KEY_ID, PASSWORD, ENV_SECRET):
        assert s not in res.output
    # ... and what is kept is still useful: the endpoint's host in config.yaml, and the redacted config in
    # the checkpoint (what `python -m torchport.train.convert` reads) still parses as a trainer config
    assert "127.0.0.1:9" in (run / "config.yaml").read_text()
    ckpt_file = next(p for p in files if p.suffix == ".pt")
    state = torch.load(ckpt_file, weights_only=True)
    assert state["config"]["storage_endpoint"] == "http://***@127.0.0.1:9/***"
    assert state["config"]["model"] == "tinycnn"
