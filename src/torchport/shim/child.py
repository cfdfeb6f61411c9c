"""The shim in the Python processes a script under ``torchport run`` starts itself.

``torch.multiprocessing.spawn`` (the DDP tutorials' launcher), spawn-context ``DataLoader`` workers
and ``multiprocessing`` with ``spawn`` / ``forkserver`` start fresh interpreters: the shim installed
in the parent is not there, so ``.cuda()`` fails in every worker. ``torchport run`` therefore puts
its settings in ``TORCHPORT_RUN_CHILD``, which every child inherits. torchport's interpreter-start
hook (``torchport-emulate.pth`` -> ``torchport_emulate_boot``) calls :func:`boot` when the variable
is set: it installs the same shim before the child's own code runs and, when the child exits,
leaves the child's redirect report in the run's report directory. :func:`collect` merges those into
the parent's report. Forked children need none of this: they inherit the installed shim.

Example (what ``torchport run`` does)::

    os.environ[ENV] = settings(device="npu", require_accelerator=None, user_paths=[script], report_dir=d)
    ...                      # the script runs; its spawned children install the shim at start
    n = collect(shim.report, d)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable

__all__ = ["ENV", "settings", "boot", "collect"]

#: The environment variable that carries a run's shim settings to its child processes.
ENV = "TORCHPORT_RUN_CHILD"


def settings(*, device: str | None, require_accelerator: bool | None, user_paths: Iterable[str],
             report_dir: str | None) -> str:
    """The value of :data:`ENV` for a run (JSON)."""
    return json.dumps({"device": device, "require_accelerator": require_accelerator,
                       "user_paths": list(user_paths), "report_dir": report_dir})


def boot() -> None:
    """Install the run's shim in this (child) interpreter; called at interpreter start by the ``.pth`` hook.

    Never raises: a child that cannot get the shim says so in one line on stderr and runs on.
    """
    try:
        cfg = json.loads(os.environ[ENV])
        from torchport.shim.core import active, install

        if active() is not None:
            return
        shim = install(cfg.get("device"), require_accelerator=cfg.get("require_accelerator"),
                       user_paths=cfg.get("user_paths") or (), warn=False)
    except Exception as exc:  # never break interpreter start-up
        print(f"torchport run: warning: child process {os.getpid()} runs without the shim: {exc}", file=sys.stderr)
        return
    report_dir = cfg.get("report_dir")
    if report_dir:
        import atexit

        def _leave_report() -> None:
            try:
                path = Path(report_dir) / f"child-{os.getpid()}.json"
                tmp = path.with_suffix(".tmp")
                tmp.write_text(shim.report.to_json())
                os.replace(tmp, path)  # the parent never reads half a report
            except OSError:
                pass  # the run is over or its directory is gone: the parent reports what it has

        atexit.register(_leave_report)


def collect(report: Any, report_dir: str | os.PathLike) -> int:
    """Merge the reports children left in ``report_dir`` into ``report``; return how many there were."""
    n = 0
    for path in sorted(Path(report_dir).glob("child-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        report.merge(data)
        n += 1
    if n:
        report.note(f"{n} child process(es) started by the script (multiprocessing spawn) ran under the shim too; "
                    "their calls are counted above")
    return n
