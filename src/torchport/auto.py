"""One-line migration: ``import torchport.auto`` at the top of a CUDA-only script.

Importing this module installs :mod:`torchport.shim` for the device torchport selects
(``TORCHPORT_DEVICE`` or auto; ``TORCHPORT_REQUIRE_ACCELERATOR=1`` turns a CPU run
into an error). It is the deliberate exception to "importing torchport has no side
effects": the import *is* the request.

The module that imports it counts as user code for the caller-aware CUDA
availability answer (see ``docs/shim.md``). Set ``TORCHPORT_SHIM_REPORT``
to get the redirect report at exit: ``text`` prints it to stderr, a path ending in
``.json`` writes the JSON report there.

Example::

    import torchport.auto   # noqa: F401  (first line of train.py)
    import torch
    # ... the script's CUDA calls and CUDA device strings now land on the selected
    # device: npu:0 on Ascend, cpu (with one warning) on a laptop

``torchport.auto.shim`` is the installed :class:`~torchport.shim.Shim`;
``torchport.shim.uninstall()`` undoes it.
"""

from __future__ import annotations

import atexit
import os
import sys

from torchport.shim import Shim, install

__all__ = ["shim"]


def _importer_file() -> str | None:
    """The source file of the module whose ``import torchport.auto`` is running now."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen") and os.path.abspath(name) != os.path.abspath(__file__):
            return name
        frame = frame.f_back
    return None


def _report_at_exit(target: Shim, setting: str) -> None:
    from torchport.env import env_int
    from torchport.shim.runner import report_path_for_rank

    rank = env_int("RANK", 0) or 0
    if setting.lower().endswith(".json"):
        target.report.write_json(report_path_for_rank(setting, rank))
    elif setting.lower() == "text" and rank == 0:
        target.report.print(sys.stderr)


_importer = _importer_file()
shim: Shim = install(user_paths=[_importer] if _importer else (), warn=True)

_setting = os.environ.get("TORCHPORT_SHIM_REPORT", "").strip()
if _setting and _setting.lower() != "none":
    atexit.register(_report_at_exit, shim, _setting)
