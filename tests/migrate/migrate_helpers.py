"""Helpers shared by the migrate tests.

Golden files (``case.expected``, ``case.out.py`` under ``tests/fixtures/migrate/<CODE>/``)
are rewritten instead of compared when pytest runs with ``--update-golden`` (tests/conftest.py
clears a ``TORCHPORT_UPDATE_GOLDEN`` left in the environment and sets it only for that option)::

    .venv/bin/python -m pytest tests/migrate -q --update-golden
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate"
REPO = Path(__file__).resolve().parents[2]


def update_golden() -> bool:
    """True when golden files should be rewritten from the current output."""
    from torchport.env import env_flag

    return env_flag("TORCHPORT_UPDATE_GOLDEN")


def check_golden(path: Path, actual: str) -> None:
    """Compare ``actual`` with the golden file (or rewrite it in update mode)."""
    if update_golden():
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; create it with pytest --update-golden")
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{path} differs from the output (pytest --update-golden rewrites it)"


def exec_on_cpu(code: str, namespace: dict | None = None) -> dict:
    """Run a (fixed) script's text in this process with torchport's device selected as the CPU; returns its
    globals. The selection is reset afterwards."""
    import torchport
    from torchport.runtime.device import reset_selection

    namespace = {} if namespace is None else namespace
    torchport.select_device("cpu", warn=False)
    try:
        exec(compile(code, "script.py", "exec"), namespace)
    finally:
        reset_selection()
    return namespace
