"""``torchport bench memory``: DDP vs FSDP state per rank on the same model, and its argument errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_bad_process_counts_are_one_line_and_exit_2():
    out = subprocess.run([sys.executable, "-m", "torchport", "bench", "memory", "--nproc", "0,2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == "torchport bench memory: error: --nproc '0,2': give process counts such as 1,2,4"


def test_table_shows_each_row_against_one_process():
    from rich.console import Console

    from torchport.bench.memory import print_memory_table

    console = Console(record=True, width=120)
    rows = [{"strategy": "one process", "nproc": 1, "model": "m", "device": "cpu", "state_mib": 8.0, "peak_mib": None,
             "rss_mib": 700.0, "note": None},
            {"strategy": "fsdp", "nproc": 4, "model": "m", "device": "cpu", "state_mib": 2.0, "peak_mib": None,
             "rss_mib": 700.0, "note": None}]
    print_memory_table(rows, console)
    text = console.export_text()
    assert "0.25" in text and "1.00" in text


@pytest.mark.slow
def test_fsdp_holds_half_the_state_of_ddp_on_two_ranks(tmp_path):
    out = subprocess.run([sys.executable, "-m", "torchport", "bench", "memory", "--model", "tinycnn", "--nproc", "2",
                          "--image-size", "16", "--device", "cpu", "--json", str(tmp_path / "m.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {r["strategy"]: r for r in json.loads((tmp_path / "m.json").read_text())}
    assert set(rows) == {"ddp", "fsdp"} and rows["ddp"]["nproc"] == rows["fsdp"]["nproc"] == 2
    share = rows["fsdp"]["state_mib"] / rows["ddp"]["state_mib"]
    assert 0.45 <= share <= 0.55, share                 # params + AdamW state: ~1/2 per rank
