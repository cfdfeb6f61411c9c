"""Issue 24: a process killed during an s3:// checkpoint upload leaves its checkpoint-sized staging file in
TMPDIR (no ``finally`` runs on SIGKILL); the next transfer removes staging files of dead processes."""

from __future__ import annotations

import os
import subprocess
import sys

from torchport.runtime import checkpoint as ckpt


def test_staging_files_of_killed_processes_are_removed_by_the_next_transfer(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPORT_STORAGE_STAGING", str(tmp_path))
    # a child that makes a staging file, then dies the way SIGKILL kills: no cleanup of any kind
    code = ("import os\nfrom torchport.runtime import checkpoint as c\n"
            "p = c._staging_file('ckpt-000000004.pt')\np.write_bytes(b'x' * 4096)\nos._exit(9)")
    subprocess.run([sys.executable, "-c", code], env={**os.environ}, check=False, timeout=120)
    leaked = list(tmp_path.iterdir())
    assert len(leaked) == 1 and leaked[0].name.endswith("-ckpt-000000004.pt")
    unrelated = tmp_path / ".torchport-staging-notapid-keep"   # not named <pid>-...: never touched
    unrelated.write_text("keep")
    mine = ckpt._staging_file("ckpt-000000008.pt")           # the next upload (a live process: kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, unrelated.name])
    live = ckpt._staging_file("ckpt-000000012.pt")           # this process's own files are never swept
    assert mine.exists() and live.exists()
