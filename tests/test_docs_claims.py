"""Claims in the README and docs/ that the code or another page can contradict (issue 23's list).

Each test reads the claim where a user reads it and checks it against the source of truth: the exit
code the code uses, the other page that quotes the same figure, the install the main job needs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
#: pages whose snippets must run as printed (no names defined in a hidden prelude of the docs test)
SELF_CONTAINED = ("README.md", "cli.md", "data.md", "train.md")


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_bad_source_exit_code_in_data_md_is_the_codes():
    from torchport.data.errors import SourceError

    row = next(ln for ln in DOCS["data.md"].splitlines() if ln.startswith("| unreadable / missing"))
    assert f"exit {int(SourceError.exit_code)}" in row, row


def test_object_store_quick_start_creates_the_bucket():
    section = DOCS["data.md"].split("## Object storage", 1)[1].split("\n## ", 1)[0]
    block = section[section.index("```bash"):section.index("**Configuration**")]
    assert re.search(r"\bmb s3://", block), "the quick start must create the bucket before packing into it"
    assert block.index(" mb s3://") < block.index("torchport data pack")


def test_train_md_does_not_claim_only_rank_0_prints():
    assert "Only rank 0 prints and writes." not in DOCS["train.md"]
    assert "every rank" in DOCS["train.md"]


def test_readme_and_train_md_quote_the_same_main_job_time():
    readme = re.search(r"\*\*Main job\*\*(.*?)\n\n", README, re.S).group(1)
    fresh = re.search(r"\*\*(\d+) s wall including", readme).group(1)
    cached = re.search(r"(\d+) s with the dataset already cached", readme).group(1)
    train = DOCS["train.md"]
    assert f"in {fresh} s on 2 CPU cores" in train and f"| **{fresh} s** |" in train
    assert f"{cached} s once the dataset is cached" in train


def test_snippets_do_not_use_hidden_preludes():
    for name in SELF_CONTAINED:
        text = README if name == "README.md" else DOCS[name]
        assert "runnable: prelude=" not in text, f"{name}: a snippet needs names the reader never sees"


def test_main_job_command_installs_what_train_needs():
    cmd = next(ln for ln in README.splitlines() if ln.startswith("python3 -m venv .venv && "))
    extra = re.search(r"pip install -e \"\.\[(\w+)\]\"", cmd)
    assert extra, cmd
    group = _pyproject()["project"]["optional-dependencies"][extra.group(1)]
    assert any(d.startswith("torch>=") for d in group) and cmd.endswith("torchport train")
