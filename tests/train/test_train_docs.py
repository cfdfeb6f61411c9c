"""docs/train.md stays in sync with the config, and the trainer keeps the house rule (no device names)."""

from __future__ import annotations

import re
from pathlib import Path

from torchport.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "train.md"
BEGIN, END = "<!-- config-table:", "<!-- end config-table -->"


def regenerate_docs_table() -> None:
    """Rewrite the table in docs/train.md from TrainConfig (run this after changing a field)."""
    text = DOC.read_text()
    start = text.index("\n", text.index(BEGIN)) + 1
    stop = text.index(END)
    DOC.write_text(text[:start] + TrainConfig.markdown_table() + text[stop:])


def test_docs_table_lists_every_key_as_in_the_code():
    text = DOC.read_text()
    section = text[text.index("\n", text.index(BEGIN)) + 1: text.index(END)]
    assert section == TrainConfig.markdown_table(), (
        "docs/train.md's config table is stale; regenerate it with: .venv/bin/python -c "
        "'import sys; sys.path.insert(0, \"tests/train\"); import test_train_docs as t; t.regenerate_docs_table()'")


def test_trainer_names_no_device_type():
    """House rule: outside backends/emulate/shim/migrate no module names a device type."""
    pattern = re.compile(r"torch\.(cuda|npu|xpu|mps)\b|\.(cuda|npu)\(|[\"'](cuda|npu|xpu|mps|nccl|hccl)[\"']")
    files = sorted((ROOT / "src" / "torchport" / "train").glob("*.py")) + [
        ROOT / "src" / "torchport" / "runtime" / "checkpoint.py", ROOT / "src" / "torchport" / "cli" / "train.py"]
    offenders = [f"{f.name}:{i}: {line.strip()}" for f in files
                 for i, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders
