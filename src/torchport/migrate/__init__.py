"""Static migration: find CUDA-only code and rewrite it device-agnostic.

``torchport scan`` / ``torchport fix`` on the command line; from Python::

    from torchport.migrate import scan_source, fix_source, scan_paths

    scan_source("x = x.cuda()\\n").findings[0].code        # 'TP101'
    fix_source("x = x.cuda()\\n")                           # 'import torchport\\n\\nx = x.to(torchport.device())\\n'
    report = scan_paths(["train.py"], select=["TP1"])      # a Report over files

Layers: :mod:`~torchport.migrate.rules` (one class per rule, declaring its code and
docs) -> :mod:`~torchport.migrate.catalog` (lookup, selection) ->
:mod:`~torchport.migrate.engine` (one LibCST walk per file, fixes) ->
:mod:`~torchport.migrate.runner` (files, .gitignore, processes) ->
:mod:`~torchport.migrate.render` (text, JSON, SARIF, CSV).
"""

from __future__ import annotations

from typing import Sequence

from torchport.migrate.finding import FileError, FileResult, Finding, Report

__all__ = ["Finding", "FileError", "FileResult", "Report", "scan_source", "fix_source", "scan_paths", "fix_paths"]


def scan_source(source: str, path: str = "<string>", *, select: Sequence[str] = (),
                ignore: Sequence[str] = ()) -> FileResult:
    """Scan one source text.

    Args:
        source: Python code.
        path: name shown in findings.
        select, ignore: code prefixes or rule names (default: all rules but TP9xx).

    Returns:
        A :class:`FileResult` (``.findings``, ``.error`` when it does not parse). A file-level
        ``# torchport: noqa[: CODES]`` comment is honoured, as on the command line.
    """
    from torchport.migrate.runner import Options, analyze_text

    return analyze_text(source, path, Options(select=tuple(select), ignore=tuple(ignore)))


def fix_source(source: str, *, select: Sequence[str] = (), ignore: Sequence[str] = (), unsafe: bool = False,
               emit: str = "torchport") -> str:
    """Return ``source`` with the applicable fixes applied (unchanged when there are none).

    Args:
        unsafe: also apply fixes marked unsafe (they may change behaviour; see each rule's page).
        emit: ``"torchport"`` (the fixes call the torchport runtime) or ``"torch"`` (torch core where torch
            has the API, e.g. ``torch.accelerator``; see :mod:`torchport.migrate.emit`).

    Raises:
        ValueError: the source does not parse (the message says where).
    """
    from torchport.migrate.runner import Options, analyze_text

    res = analyze_text(source, "<string>", Options(select=tuple(select), ignore=tuple(ignore), fix=True,
                                                   unsafe_fixes=unsafe, emit=emit))
    if res.error is not None:
        raise ValueError(res.error.message)
    return res.fixed_source if res.fixed_source is not None else source


def scan_paths(paths: Sequence[str], **options) -> Report:
    """Scan files and directories; keyword options as :class:`~torchport.migrate.runner.Options`."""
    from torchport.migrate.runner import Options, run

    return run(paths, Options(**options))


def fix_paths(paths: Sequence[str], *, write: bool = False, **options) -> Report:
    """Fix files and directories; with ``write=True`` rewrite them in place."""
    from torchport.migrate.runner import Options, run

    return run(paths, Options(fix=True, write=write, **options))
