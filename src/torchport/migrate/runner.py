"""Run the engine over many files: discovery, a text prefilter, worker processes, writing back.

Example::

    from torchport.migrate.runner import Options, run
    report = run(["src"], Options(select=("TP1",), exclude=("src/vendored",)))
    print(len(report.findings), report.lines / report.seconds, "lines/s")
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import difflib
import io
import multiprocessing
import os
import re
import shutil
import time
import tokenize
from pathlib import Path
from typing import Sequence

from torchport.migrate.finding import FileError, FileResult, Report
from torchport.migrate.files import IgnoreRules, iter_python_files

__all__ = ["Options", "run", "run_source", "process_file", "analyze_text", "unified_diff", "file_noqa"]

#: The file-level suppression, on a line of its own: ``# torchport: noqa`` (the whole file) or
#: ``# torchport: noqa: TP101, TP2`` (these codes / prefixes in the whole file).
_FILE_NOQA = re.compile(r"^[ \t]*#[ \t]*torchport:[ \t]*noqa(?:[ \t]*:[ \t]*(?P<codes>[A-Za-z0-9]+(?:[ \t,]+[A-Za-z0-9]+)*))?"
                        r"[ \t]*$", re.MULTILINE)

# below this many files, worker start-up costs more than it saves
_PARALLEL_MIN_FILES = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """What to scan and how.

    Args:
        select: code prefixes / rule names to report (default: all but TP9xx); ``ALL`` for all.
        ignore: code prefixes / rule names to drop from the selection.
        exclude: gitignore-style patterns (relative to the current directory) to skip.
        respect_gitignore: skip files ignored by ``.gitignore``.
        jobs: worker processes (default: CPU count; 1 runs in this process).
        fix: compute rewrites.
        unsafe_fixes: also apply fixes marked unsafe.
        write: write rewrites back to the files (implies ``fix``).
        per_file_ignores: ``(root, pattern, codes)``: ``codes`` are ignored in the files the gitignore-style
            ``pattern`` matches relative to the directory ``root`` (``[tool.torchport.per-file-ignores]``).
    """

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    jobs: int | None = None
    fix: bool = False
    unsafe_fixes: bool = False
    write: bool = False
    per_file_ignores: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        for name in ("select", "ignore", "exclude"):
            val = getattr(self, name)
            if isinstance(val, str):
                object.__setattr__(self, name, (val,))
            else:
                object.__setattr__(self, name, tuple(val))
        if self.write and not self.fix:
            object.__setattr__(self, "fix", True)
        if self.jobs is not None and self.jobs < 1:
            raise ValueError(f"jobs={self.jobs}: must be >= 1")


_worker_options: Options | None = None


def _init_worker(options: Options) -> None:
    global _worker_options
    _worker_options = options


def _read(path: str) -> tuple[str, str]:
    """Text and encoding of a Python file (PEP 263 cookie or BOM, else UTF-8)."""
    with open(path, "rb") as fh:
        data = fh.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if encoding == "utf-8-sig":
        text = text.lstrip("\ufeff")
    return text, encoding


def unified_diff(path: str, before: str, after: str) -> str:
    """A unified diff of one file (``a/`` and ``b/`` prefixes, 3 lines of context)."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))


def file_noqa(text: str) -> tuple[str, ...] | None:
    """The codes a file-level ``# torchport: noqa[: CODES]`` comment silences: None (no such comment),
    ``()`` (the bare form: everything) or the codes/prefixes (upper-cased; flake8's ``TPT`` spelling too)."""
    if "noqa" not in text:
        return None
    found: list[str] = []
    for m in _FILE_NOQA.finditer(text):
        if m.group("codes") is None:
            return ()
        found += [c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c]
    if not found:
        return None
    return tuple("TP" + c[3:] if c.startswith("TPT") else c for c in found)


def _per_file_ignores(path: str, options: Options) -> tuple[str, ...]:
    out: list[str] = []
    for root, pattern, codes in options.per_file_ignores:
        full = Path(path).resolve()
        if IgnoreRules(Path(root), [pattern]).match(full, False):
            out += codes
    return tuple(out)


def _known(tokens: Sequence[str]) -> tuple[str, ...]:
    """The tokens that name a rule (a comment naming another tool's code, or a typo, silences nothing)."""
    from torchport.migrate import catalog

    return tuple(t for t in tokens if any(catalog._matches(r, t) for r in catalog.rules()))


def analyze_text(text: str, path: str, options: Options | None = None):
    """Analyse source ``text`` shown as ``path`` per ``options``, honouring the file-level noqa comment
    and the per-file ignores. Never writes; returns a :class:`FileResult`."""
    from torchport.migrate import catalog
    from torchport.migrate.engine import analyze

    options = options or _worker_options or Options()
    silenced = file_noqa(text)
    if silenced == ():
        return FileResult(path=path, lines=text.count("\n") + (1 if text and not text.endswith("\n") else 0))
    extra = _known((silenced or ()) + _per_file_ignores(path, options))
    ruleset = catalog.ruleset(options.select, options.ignore + extra)
    return analyze(text, path, ruleset, fix=options.fix, unsafe=options.unsafe_fixes,
                   positions_after_fix=options.write)


def run_source(text: str, path: str = "-", options: Options | None = None) -> Report:
    """Scan (and with ``options.fix`` fix) one in-memory source, e.g. stdin; nothing is written."""
    t0 = time.perf_counter()
    options = dataclasses.replace(options or Options(), write=False)
    try:
        result = analyze_text(text, path, options)
    except RecursionError:
        result = FileResult(path=path, error=FileError(path=path, message="too deeply nested to analyse"))
    return Report.from_results([result], seconds=time.perf_counter() - t0)


def process_file(path: str, options: Options | None = None) -> FileResult:
    """Analyse one file per ``options`` (and write it back when ``options.write``)."""
    options = options or _worker_options or Options()
    try:
        text, encoding = _read(path)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return FileResult(path=path, error=FileError(path=path, message=f"could not read: {exc}"))
    try:
        result = analyze_text(text, path, options)
    except RecursionError:
        return FileResult(path=path, error=FileError(path=path, message="too deeply nested to analyse"))
    except Exception as exc:  # a scanner bug must not stop the other files; it is reported
        return FileResult(path=path, error=FileError(path=path, message=f"internal error: {type(exc).__name__}: {exc}"))
    if result.fixed_source is not None and options.write:
        problem = write_back(path, result.fixed_source, encoding)
        if problem is not None:
            # nothing was written: report the findings as they stand in the file, plus the error
            result = analyze_text(text, path, dataclasses.replace(options, fix=False, write=False))
            result.error = FileError(path=path, message=problem)
    return result


def write_back(path: str, text: str, encoding: str) -> str | None:
    """Atomically replace the file at ``path`` (its symlink target, when it is a link) with ``text``.

    Returns None on success, or a one-line reason (``could not write: ...``) when the file could
    not be replaced -- then the file is untouched and no temporary file is left behind.
    """
    real = os.path.realpath(path)      # fix the target; the link stays a link
    tmp = f"{real}.torchport-tmp"
    try:
        if not os.access(real, os.W_OK):
            raise PermissionError(13, "Permission denied (the file is read-only)", real)
        with open(tmp, "w", encoding=encoding, newline="") as fh:
            fh.write(text)
        shutil.copymode(real, tmp)  # an executable script stays executable
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        reason = exc.strerror or type(exc).__name__
        where = f" (link target {real})" if real != os.path.abspath(path) else ""
        return f"could not write: {reason}{where}; nothing was changed in this file"
    return None


def _mp_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def run(paths: Sequence[str | os.PathLike], options: Options | None = None) -> Report:
    """Scan (and optionally fix) every Python file under ``paths``.

    Raises:
        FileNotFoundError: a path does not exist.
        torchport.migrate.catalog.UnknownRuleError: a select/ignore token matches no rule.
    """
    from torchport.migrate import catalog

    options = options or Options()
    catalog.ruleset(options.select, options.ignore)  # validate before starting workers
    t0 = time.perf_counter()
    files = [str(p) for p in iter_python_files(paths, exclude=options.exclude,
                                                respect_gitignore=options.respect_gitignore)]
    jobs = options.jobs or os.cpu_count() or 1
    if jobs == 1 or len(files) < _PARALLEL_MIN_FILES:
        results = [process_file(f, options) for f in files]
    else:
        # biggest files first, so no worker is left with a huge file at the end
        order = sorted(files, key=lambda f: -_size(f))
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=_mp_context(),
                                                    initializer=_init_worker, initargs=(options,)) as pool:
            results = list(pool.map(process_file, order, chunksize=max(1, min(16, len(order) // (jobs * 8)))))
    return Report.from_results(results, seconds=time.perf_counter() - t0)


def _size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0
