"""The README is part of the product: its links resolve and its commands match CI."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_relative_links_exist():
    links = [l for l in re.findall(r"\]\(([^)#\s]+)\)", README) if not re.match(r"[a-z]+://", l)]
    assert len(links) > 20
    missing = [l for l in links if not (ROOT / l).exists()]
    assert not missing, f"README links to missing paths: {missing}"


def test_architecture_map_names_key_files():
    for path in ("src/torchport/backends/spec.py", "src/torchport/backends/registry.py",
                 "src/torchport/runtime/", "src/torchport/migrate/rules/", "src/torchport/train/"):
        assert f"]({path})" in README


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest" in README
    assert '-m pytest' in ci and '-e ".[dev]"' in ci and '-e ".[dev]"' in README


def test_no_placeholders_left():
    assert "PLACEHOLDER" not in README and "TODO" not in README
