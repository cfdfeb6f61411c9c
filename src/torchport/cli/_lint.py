"""What ``scan`` and ``fix`` share: settings from the config file and the flags, one run, what ``-v`` tells.

:func:`run_linter` merges ``[tool.torchport]`` / ``torchport.toml`` with the flags into
:class:`~torchport.migrate.runner.Options`, runs it (stdin or paths), shows a progress bar on a terminal for
long runs, and with ``-v`` names the settings file, the cache, every file left out and why, and the time
each analysed file took. A file named on the command line that an exclude pattern matches is not scanned
(ruff's ``--force-exclude`` semantics, always on: pre-commit names every staged file) and gets a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import typer

__all__ = ["Settings", "run_linter", "tokens", "extensions"]

_LOG = logging.getLogger("torchport.cli.lint")
#: a progress bar is shown (on a terminal) when at least this many files need analysing
PROGRESS_MIN_FILES = 50


def tokens(values: Optional[List[str]]) -> tuple[str, ...]:
    """Repeatable options that also accept comma-separated lists."""
    return tuple(t.strip() for v in (values or []) for t in v.split(",") if t.strip())


def extensions(verb: str, values: Optional[List[str]]) -> tuple[tuple[str, str], ...]:
    """``--extension EXT:LANG`` values (``pyw:python``, ``ipy:ipynb``), checked."""
    from torchport.cli._common import fail

    out = []
    for value in tokens(values):
        ext, sep, lang = value.partition(":")
        ext, lang = ext.strip().lstrip(".").lower(), lang.strip().lower()
        if not sep or not ext or lang not in ("python", "ipynb"):
            fail(verb, f"--extension {value}: give SUFFIX:LANGUAGE with LANGUAGE python or ipynb, e.g. "
                       "--extension pyw:python")
        out.append((ext, lang))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the settings come from and the flags that are not rule choices."""

    config: Optional[Path] = None
    isolated: bool = False
    stdin_filename: Optional[str] = None
    no_cache: bool = False
    cache_dir: Optional[Path] = None
    extensions: tuple[tuple[str, str], ...] = ()
    extend_select: tuple[str, ...] = ()


def _stdin_text(verb: str) -> str:
    """The source on stdin (``-``); a usage error when stdin is a terminal (nothing was piped in)."""
    if sys.stdin is None or sys.stdin.isatty():
        from torchport.cli._common import fail

        fail(verb, "'-' reads the source from stdin, but nothing is piped in; e.g. cat f.py | torchport "
                   f"{verb} - --stdin-filename f.py")
    return sys.stdin.read()


def _cache_dir(settings: Settings, cfg, names: Sequence[str]) -> Optional[str]:
    """The cache folder: ``--cache-dir``, ``TORCHPORT_CACHE_DIR``, ``cache-dir``, else ``.torchport_cache``
    beside the settings file (or in the current directory); None with ``--no-cache``."""
    from torchport.migrate.cache import DEFAULT_DIR

    if settings.no_cache:
        return None
    if settings.cache_dir is not None:
        return str(settings.cache_dir)
    env = os.environ.get("TORCHPORT_CACHE_DIR", "").strip()
    if env:
        return env
    if cfg.cache_dir is not None:
        return str(cfg.cache_dir)
    return str((cfg.root or Path.cwd()) / DEFAULT_DIR)


class _Progress:
    """A rich progress bar on stderr, started on the first call with enough files; closed by :meth:`close`."""

    def __init__(self, verb: str) -> None:
        self.verb, self.bar, self.task = verb, None, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < PROGRESS_MIN_FILES:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            from torchport.log import console

            self.bar = Progress(TextColumn(f"torchport {self.verb}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.verb, total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _show_progress() -> bool:
    return sys.stderr is not None and sys.stderr.isatty() and logging.getLogger("torchport").getEffectiveLevel() <= (
        logging.WARNING)


def _on_skip(verb: str):
    def skipped(path: str, reason: str) -> None:
        if reason.startswith("named"):
            _LOG.warning("%s: not scanned: %s", path, reason)
        else:
            _LOG.info("skipped %s: %s", path, reason)
    return skipped


def run_linter(verb: str, paths, select, ignore, exclude, no_gitignore, jobs, *, fix=False, unsafe=False,
               write=False, settings: Optional[Settings] = None, emit=None):
    """Run the scanner over ``paths`` (default ``.``; ``-`` = stdin, shown as ``settings.stdin_filename``).

    The config file's values merge with the flags: ``--select`` replaces ``select``, ``--extend-select`` and
    ``extend-select`` add to it, ``--ignore`` / ``--exclude`` add, ``--unsafe-fixes`` or the file's
    ``unsafe-fixes`` turns unsafe fixes on, ``--emit`` replaces ``emit``.
    """
    from torchport.cli._common import fail
    from torchport.errors import ConfigError
    from torchport.migrate.config import load_config
    from torchport.migrate.runner import Options, run, run_source

    settings = settings or Settings()
    names = [str(p) for p in paths or ()] or ["."]
    if "-" in names and len(names) > 1:
        fail(verb, "'-' (stdin) cannot be combined with other paths; give one or the other")
    stdin = names == ["-"]
    if settings.stdin_filename is not None and not stdin:
        fail(verb, "--stdin-filename names the source read from stdin; give '-' as the path")
    shown_as = settings.stdin_filename or "-"
    try:
        cfg = load_config([shown_as] if stdin else names, config=settings.config, isolated=settings.isolated)
        _LOG.info("settings: %s", cfg.path if cfg.path is not None else
                  ("none (--isolated)" if settings.isolated else "none found (defaults)"))
        chosen = tokens(select) or cfg.select
        extend = cfg.extend_select + settings.extend_select
        if extend:
            chosen = (chosen or ("DEFAULT",)) + extend
        cache_dir = None if stdin else _cache_dir(settings, cfg, names)
        _LOG.info("cache: %s", cache_dir if cache_dir is not None else "off")
        options = Options(select=chosen, ignore=cfg.ignore + tokens(ignore),
                          exclude=(cfg.exclude or ()) + cfg.extend_exclude + tokens(exclude),
                          respect_gitignore=not no_gitignore, jobs=jobs, fix=fix, unsafe_fixes=unsafe or cfg.unsafe_fixes,
                          write=write, per_file_ignores=cfg.per_file_ignores, emit=emit or cfg.emit or "torchport",
                          cache_dir=cache_dir, extensions=cfg.extensions + settings.extensions,
                          skip_default_dirs=cfg.exclude is None)
        if stdin:
            from torchport.migrate import catalog

            catalog.ruleset(options.select, options.ignore)   # a bad code is a usage error before reading stdin
            text = _stdin_text(verb)
            report = run_source(text, shown_as, options)
            for res in report.results:   # kept for `fix - --write`, which prints the source back
                res.source = text if res.source is None else res.source
            return report
        progress = _Progress(verb) if _show_progress() else None
        try:
            report = run(names, options, progress=progress, on_skip=_on_skip(verb))
        finally:
            if progress is not None:
                progress.close()
        if _LOG.isEnabledFor(logging.INFO):
            for res in sorted(report.results, key=lambda r: -r.seconds):
                if res.seconds:
                    _LOG.info("%7.3f s  %s", res.seconds, res.path)
            _LOG.info("%d file(s), %d answered by the cache, %.2f s", report.files, report.cached, report.seconds)
        return report
    except ConfigError:
        raise      # the guard prints it (exit 2)
    except (ValueError, FileNotFoundError) as exc:   # UnknownRuleError is a ValueError
        fail(verb, str(exc))
