"""Shared test configuration.

Device-parametrised tests use the ``portable_device`` fixture from the torchport pytest
plugin (``torchport.emulate.pytest_plugin``): cpu, emulated npu, and cuda when present.
"""

from __future__ import annotations

import os

import pytest

# Tests must never pick up a developer's device settings by accident -- nor a golden-update switch left
# in the shell: with TORCHPORT_UPDATE_GOLDEN set, every golden test would pass by rewriting its file.
for _var in ("TORCHPORT_DEVICE", "TORCHPORT_REQUIRE_ACCELERATOR", "TORCHPORT_EMULATE", "TORCHPORT_UPDATE_GOLDEN"):
    os.environ.pop(_var, None)
# The CPU precision policy is pinned to the answer of a CPU without native bf16/fp16 (the CI machines'),
# so a test means the same on an AVX2 laptop and an AMX server; tests/runtime/test_cpu_precision.py
# exercises the real decision with the facts injected.
os.environ["TORCHPORT_CPU_BF16"] = "none"
os.environ["TORCHPORT_CPU_FP16"] = "none"


def pytest_addoption(parser):
    parser.addoption("--strict-skips", action="store_true", default=False,
                     help="fail the run when a test skips for a reason not on tests/skip_allowlist.txt "
                          "(.ci/run passes it; the skip count is always printed)")
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files (fixtures, tests/golden/*) from the current output instead of "
                          "comparing; the only way to turn updating on (TORCHPORT_UPDATE_GOLDEN is cleared)")


def pytest_configure(config):
    if config.getoption("--update-golden"):
        os.environ["TORCHPORT_UPDATE_GOLDEN"] = "1"
    # Tests build small projects in temporary folders and scan / test them as a user would; inside this
    # checkout, its pyproject.toml and .gitignore would apply to them (as they would to any nested folder)
    # and dozens of tests would fail for a reason that is not theirs. One line instead.
    import tempfile
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    tmp = Path(config.option.basetemp or tempfile.gettempdir()).resolve()
    if tmp == root or root in tmp.parents:
        raise pytest.UsageError(f"the temporary folder {tmp} is inside the checkout {root}: set TMPDIR (or "
                                f"--basetemp) to a folder outside it")


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per usable core, at most 4 -- many tests start torchrun with two ranks of
    their own, so more workers than that only add memory and contention."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


# -- skip policy ---------------------------------------------------------------------------------------
_SKIPS: list[tuple[str, str]] = []
ALLOWLIST = os.path.join(os.path.dirname(__file__), "skip_allowlist.txt")


def load_skip_allowlist(path: str = ALLOWLIST) -> list[tuple[str, str, str]]:
    """``(node id glob, reason substring, why)`` rows of tests/skip_allowlist.txt."""
    rows = []
    if not os.path.exists(path):      # no allow-list: every skip is "not allowed"
        return rows
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3 or not all(parts):
                raise ValueError(f"{path}:{n}: expected '<node id glob> | <reason substring> | <why>', got {line!r}")
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def skip_allowed(nodeid: str, reason: str, rows) -> bool:
    """True when some allow-list row matches both the node id (glob) and the reason (substring)."""
    import fnmatch

    return any(fnmatch.fnmatchcase(nodeid, glob) and sub in reason for glob, sub, _ in rows)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        _SKIPS.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_sessionfinish(session, exitstatus):
    rows = load_skip_allowlist()
    bad = [(n, r) for n, r in _SKIPS if not skip_allowed(n, r, rows)]
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    write = tr.write_line if tr is not None else print
    write(f"skips: {len(_SKIPS)} ({len(_SKIPS) - len(bad)} on tests/skip_allowlist.txt, {len(bad)} not)")
    if bad and session.config.getoption("--strict-skips"):
        for nodeid, reason in bad:
            write(f"  NOT ALLOWED: {nodeid}: {reason}")
        write("a skip that is not on tests/skip_allowlist.txt fails the run (it would hide a regression); "
              "make the test run, or add a documented entry")
        if session.exitstatus in (0, 5):
            session.exitstatus = 1


@pytest.fixture(autouse=True)
def _fresh_selection():
    """Each test starts with no remembered device selection."""
    from torchport.runtime.device import reset_selection

    reset_selection()
    yield
    reset_selection()


@pytest.fixture(autouse=True)
def _no_leftover_shim():
    """An in-process ``torchport run`` leaves its shim installed (for the script's atexit handlers); a test
    that ran one must not hand it to the next test (it would, e.g., turn ``pin_memory()`` into a no-op)."""
    yield
    import sys

    core = sys.modules.get("torchport.shim.core")
    if core is not None and core.active() is not None:
        core.uninstall()
