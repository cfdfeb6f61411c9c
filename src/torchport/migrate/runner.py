"""Run the engine over many files: discovery, the scan cache, worker processes, writing back.

Per file: the cache (:mod:`torchport.migrate.cache`) answers when the file's bytes, the settings and
torchport are unchanged; else the fast scan (:mod:`torchport.migrate.fast`: ``ast`` finds where a rule can
fire, LibCST sees only those statements); ``fix`` runs the full LibCST pass only on files with a finding
it can rewrite.

Example::

    from torchport.migrate.runner import Options, run
    report = run(["src"], Options(select=("TP1",), exclude=("src/vendored",)))
    print(len(report.findings), report.lines / report.seconds, "lines/s")
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import gc
import io
import itertools
import os
import re
import shutil
import time
import tokenize
from pathlib import Path
from typing import Callable, Sequence

from torchport.migrate.config import EMITS
from torchport.migrate.finding import FileError, FileResult, Report, line_count
from torchport.migrate.files import IgnoreRules, iter_python_files, language

__all__ = ["Options", "run", "run_source", "process_file", "analyze_text", "unified_diff", "file_noqa"]

#: The file-level suppression, on a line of its own: ``# torchport: noqa`` (the whole file) or
#: ``# torchport: noqa: TP101, TP2`` (these codes / prefixes in the whole file).
_FILE_NOQA = re.compile(r"^[ \t]*#[ \t]*torchport:[ \t]*noqa(?:[ \t]*:[ \t]*(?P<codes>[A-Za-z0-9]+(?:[ \t,]+[A-Za-z0-9]+)*))?"
                        r"[ \t]*$", re.MULTILINE)

#: TORCHPORT_SCAN_FULL_PASS=1: every file takes the full LibCST pass (the reference the fast scan is measured and
#: tested against; benchmarks/bench_scan.py). Same findings, only slower.
_FULL_PASS_ONLY = os.environ.get("TORCHPORT_SCAN_FULL_PASS", "") == "1"

# below this many files, worker start-up costs more than it saves
_PARALLEL_MIN_FILES = 16
#: with the default ``jobs``, the text the analysed files must hold for worker processes to pay: below it (timm's
#: 1.2 MB that pass the prefilter: ~0.8 s) one process does the work at ~0.6 s less CPU than two (median 1.16 s
#: against 1.78 s, 7 runs each on a 2-core VM: the pool's processes run the same files slower side by side) and
#: ~0.2 s more wall time
_PARALLEL_MIN_BYTES = 2_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """What to scan and how.

    Args:
        select: code prefixes / rule names to report (default: all but TP9xx); ``ALL`` for all.
        ignore: code prefixes / rule names to drop from the selection.
        exclude: gitignore-style patterns (relative to the current directory) to skip.
        respect_gitignore: skip files ignored by ``.gitignore``.
        jobs: worker processes (default: CPU count when the files the text prefilter cannot rule out hold 2 MB
            or more, else 1; 1 runs in this process).
        fix: compute rewrites.
        unsafe_fixes: also apply fixes marked unsafe.
        write: write rewrites back to the files (implies ``fix``).
        per_file_ignores: ``(root, pattern, codes)``: ``codes`` are ignored in the files the gitignore-style
            ``pattern`` matches relative to the directory ``root`` (``[tool.torchport.per-file-ignores]``).
        emit: what fixes write: ``"torchport"`` (the runtime) or ``"torch"`` (torch core where torch has
            the API; :mod:`torchport.migrate.emit`).
        cache_dir: the scan cache's folder (:mod:`torchport.migrate.cache`); None: no cache.
        extensions: file suffix -> language (``"python"`` or ``"ipynb"``) for the suffixes a directory walk
            also takes (``.py`` and ``.ipynb`` always).
        skip_default_dirs: enter no folder by name alone (``.git``, ``.venv`` ...): ``exclude`` in the
            settings replaced that list (its patterns are in ``exclude``).
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
    emit: str = "torchport"
    cache_dir: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    skip_default_dirs: bool = True
    #: resolved roots of the trees given (set by :func:`run` for ``write``): nothing outside them is written
    write_roots: tuple[str, ...] = ()

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
        if self.emit not in EMITS:
            raise ValueError(f"emit={self.emit!r}: choose one of {', '.join(EMITS)}")


_worker_options: Options | None = None


def _init_worker(options: Options) -> None:
    global _worker_options
    _worker_options = options


def _read(path: str) -> tuple[str, str, bytes]:
    """Text, encoding and raw bytes of a Python file (PEP 263 cookie or BOM, else UTF-8)."""
    with open(path, "rb") as fh:
        data = fh.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if encoding == "utf-8-sig":
        text = text.lstrip("\ufeff")
    return text, encoding, data


#: CPython refuses more than 200 nested brackets ("too many nested parentheses"); LibCST's native
#: parser has no such limit and overflows its stack (SIGSEGV) on a few thousand.
MAX_BRACKET_DEPTH = 200
_NOT_BRACKET = re.compile(r"[^][(){}]+")
_BRACKET_STEP = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
#: a line this long (generated code) is parsed in a process of its own, whose crash costs only that file
LONG_LINE = 10000


def _long_line(text: str) -> bool:
    """True when a line of ``text`` (split at ``\n``) is :data:`LONG_LINE` characters or longer. C-level
    splitting: the regex ``[^\n]{10000}`` it replaces cost ~0.5 ms per ordinary file."""
    return len(text) >= LONG_LINE and max(map(len, text.split("\n"))) >= LONG_LINE


def nesting_problem(text: str) -> str | None:
    """A one-line reason when ``text`` is nested deeper than Python itself accepts, else None.

    Cheap (one regex pass over the brackets); a count inflated by brackets inside strings or comments
    is confirmed by CPython's own parser before the file is refused.
    """
    if text.count("(") + text.count("[") + text.count("{") <= MAX_BRACKET_DEPTH:
        return None    # fewer brackets in all than the limit (C-level counts)
    brackets = _NOT_BRACKET.sub("", text)
    deepest = max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)
    if deepest <= MAX_BRACKET_DEPTH:
        return None
    try:
        compile(text, "<scan>", "exec", flags=0x400, dont_inherit=True)   # ast.PyCF_ONLY_AST
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        return f"too deeply nested to analyse ({deepest} levels of brackets; Python refuses it too: {exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__})"
    return None


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


def _extra_ignores(text: str, path: str, options: Options) -> tuple[str, ...] | None:
    """The codes the file-level noqa comment and the per-file ignores add for this file (as written), or
    None when the bare ``# torchport: noqa`` silences the whole file."""
    silenced = file_noqa(text)
    if silenced == ():
        return None
    return (silenced or ()) + _per_file_ignores(path, options)


def analyze_text(text: str, path: str, options: Options | None = None):
    """Analyse source ``text`` shown as ``path`` per ``options``, honouring the file-level noqa comment
    and the per-file ignores. Never writes; returns a :class:`FileResult`.

    A scan takes the fast path (:func:`torchport.migrate.fast.scan`); a fix runs the full pass only when the
    scan found something."""
    from torchport.migrate import catalog, fast

    options = options or _worker_options or Options()
    extra = _extra_ignores(text, path, options)
    if extra is None:
        return FileResult(path=path, lines=line_count(text))
    ruleset = catalog.ruleset(options.select, options.ignore + _known(extra))
    if _FULL_PASS_ONLY:   # benchmarks/bench_scan.py's "full pass" row
        from torchport.migrate.engine import analyze

        return analyze(text, path, ruleset, fix=options.fix, unsafe=options.unsafe_fixes,
                       positions_after_fix=options.write, emit=options.emit)
    scanned = fast.scan(text, path, ruleset, emit=options.emit)
    if not options.fix or scanned.error is not None or not scanned.findings:
        return scanned
    from torchport.migrate.engine import analyze

    return analyze(text, path, ruleset, fix=options.fix, unsafe=options.unsafe_fixes,
                   positions_after_fix=options.write, emit=options.emit)


def run_source(text: str, path: str = "-", options: Options | None = None) -> Report:
    """Scan (and with ``options.fix`` fix) one in-memory source, e.g. stdin; nothing is written."""
    t0 = time.perf_counter()
    options = dataclasses.replace(options or Options(), write=False)
    problem = nesting_problem(text)     # LibCST would crash this process (SIGSEGV)
    if problem is None:
        try:
            with _no_gc_pauses():
                result = analyze_text(text, path, options)
        except RecursionError:
            problem = "too deeply nested to analyse"
    if problem is not None:
        result = FileResult(path=path, error=FileError(path=path, message=problem))
    return Report.from_results([result], seconds=time.perf_counter() - t0)


@contextlib.contextmanager
def _no_gc_pauses():
    """The cyclic garbage collector off while one file is analysed, back as it was after it.

    Parsing allocates a few hundred thousand objects per thousand lines, nearly all freed by reference counting;
    the collector's passes over them measured ~30% of ``ast.parse`` and ~13% of a whole timm scan. A cycle made
    while the file is analysed is collected after it (the collector's counts then trigger a pass), so memory
    stays bounded by one file."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def process_file(path: str, options: Options | None = None) -> FileResult:
    """Analyse one file per ``options`` (and write it back when ``options.write``); ``seconds`` says how long."""
    t0 = time.perf_counter()
    with _no_gc_pauses():
        result = _process_file(path, options or _worker_options or Options())
    result.seconds = time.perf_counter() - t0
    return result


def _process_file(path: str, options: Options) -> FileResult:
    try:
        text, encoding, data = _read(path)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return FileResult(path=path, error=FileError(path=path, message=f"could not read: {exc}"))
    if language(path, dict(options.extensions)) == "ipynb":
        return _process_notebook(path, text, data, options)
    deep = nesting_problem(text)
    if deep is not None:   # LibCST would crash the process (SIGSEGV): one line for this file instead
        return FileResult(path=path, error=FileError(path=path, message=deep))
    if _worker_options is None and _long_line(text):
        # generated code with huge expressions can still crash the native parser: not in this process
        return _isolated(path, options)
    try:
        result = analyze_text(text, path, options)
    except RecursionError:
        return FileResult(path=path, error=FileError(path=path, message="too deeply nested to analyse"))
    except Exception as exc:  # a scanner bug must not stop the other files; it is reported
        return FileResult(path=path, error=FileError(path=path, message=f"internal error: {type(exc).__name__}: {exc}"))
    if result.fixed_source is not None and options.write:
        problem = write_back(path, result.fixed_source, encoding, expected=data, roots=options.write_roots)
        if problem is not None:
            # nothing was written: report the findings as they stand in the file, plus the error
            result = analyze_text(text, path, dataclasses.replace(options, fix=False, write=False))
            result.error = FileError(path=path, message=problem)
    return result


def _process_notebook(path: str, text: str, data: bytes, options: Options) -> FileResult:
    """A notebook: its code cells as one Python text (:mod:`torchport.migrate.notebook`), findings at
    cell-relative positions, fixes written into the cells' sources only (JSON layout kept)."""
    from torchport.migrate.notebook import Notebook, NotebookError

    try:
        nb = Notebook.load(text)
    except NotebookError as exc:
        return FileResult(path=path, error=FileError(path=path, message=str(exc)))
    if not nb.segments:
        return FileResult(path=path)
    problem = nesting_problem(nb.virtual)
    if problem is not None:
        return FileResult(path=path, error=FileError(path=path, message=problem))
    try:
        result = analyze_text(nb.virtual, path, options)
    except RecursionError:
        return FileResult(path=path, error=FileError(path=path, message="too deeply nested to analyse"))
    except Exception as exc:  # a scanner bug must not stop the other files; it is reported
        return FileResult(path=path, error=FileError(path=path, message=f"internal error: {type(exc).__name__}: {exc}"))
    after = nb
    if result.fixed_source is not None:
        try:
            new_text = nb.rebuild(result.fixed_source)
            after = Notebook.load(new_text)
        except NotebookError as exc:
            result = analyze_text(nb.virtual, path, dataclasses.replace(options, fix=False, write=False))
            result.error = FileError(path=path, message=str(exc))
            new_text = None
        if new_text is not None:
            result.source, result.fixed_source = text, new_text
            if options.write:
                problem = write_back(path, new_text, "utf-8", expected=data, roots=options.write_roots)
                if problem is not None:
                    result = analyze_text(nb.virtual, path, dataclasses.replace(options, fix=False, write=False))
                    result.error = FileError(path=path, message=problem)
                    after = nb
    result.findings = [_in_cell(f, nb if f.fixed or not options.write else after) for f in result.findings]
    if result.error is not None and result.error.line is not None:
        cell, line = nb.cell_position(result.error.line)
        result.error = FileError(path=path, message=f"cell {cell}, line {line}: {result.error.message}", line=None)
    result.lines = nb.lines
    return result


def _in_cell(finding, nb):
    """``finding`` (at a line of the notebook's Python text) at its cell-relative position."""
    cell, line = nb.cell_position(finding.line)
    end_cell, end_line = nb.cell_position(finding.end_line)
    return dataclasses.replace(finding, cell=cell, line=line, end_line=end_line if end_cell == cell else line)


def tree_roots(paths: Sequence[str | os.PathLike]) -> tuple[str, ...]:
    """The resolved roots of the trees ``paths`` name: a directory itself, a named file's directory."""
    out = []
    for p in paths:
        a = os.path.abspath(os.fspath(p))
        out.append(os.path.realpath(a if os.path.isdir(a) else os.path.dirname(a)))
    return tuple(out)


def outside_roots(path: str, roots: Sequence[str]) -> str | None:
    """None when the file ``path`` really is (symlinks followed) inside one of ``roots``; else why not."""
    if not roots:
        return None
    from torchport.paths import inside

    real = os.path.realpath(path)
    if any(inside(path, r) for r in roots):
        return None
    return (f"not written: it is a symlink to {real}, outside the tree given ({roots[0]}); fix that file "
            "where it lives, or name its own directory")


def write_back(path: str, text: str, encoding: str, *, expected: bytes | None = None,
               roots: Sequence[str] = ()) -> str | None:
    """Atomically replace the file at ``path`` (its symlink target, when it is a link) with ``text``.

    With ``roots`` (:func:`tree_roots` of what the user named), a link whose target lies outside every
    root is refused: ``fix --write`` never writes outside the tree it was given.

    With ``expected`` (the bytes the fix was computed from), the file is replaced only if it still
    holds exactly those bytes: compare-and-swap under a per-file lock, so an edit made while the fix
    ran, or a concurrent ``torchport fix``, is never overwritten.

    Returns None on success, or a one-line reason (``could not write: ...``, ``changed since it was
    read ...``) -- then the file is untouched and no temporary file is left behind.
    """
    import tempfile

    out = outside_roots(path, roots)
    if out is not None:
        return out
    real = os.path.realpath(path)      # fix the target; the link stays a link
    where = f" (link target {real})" if real != os.path.abspath(path) else ""
    tmp = None
    try:
        with _file_lock(real):
            if not os.access(real, os.W_OK):
                raise PermissionError(13, "Permission denied (the file is read-only)", real)
            if expected is not None:
                with open(real, "rb") as fh:
                    if fh.read() != expected:
                        return (f"changed since it was read{where} (edited meanwhile, or another `torchport fix` "
                                "wrote it); nothing was written to this file -- run fix again")
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".torchport-tmp",
                                       dir=os.path.dirname(real))
            with os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
                fh.write(text)
            shutil.copymode(real, tmp)  # an executable script stays executable
            os.replace(tmp, real)
            tmp = None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"could not write: {reason}{where}; nothing was changed in this file"
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return None


def _file_lock(real: str):
    """An inter-process lock for one file, kept outside the user's tree (no lock file left in it)."""
    import hashlib
    import tempfile

    from filelock import FileLock

    folder = os.path.join(tempfile.gettempdir(), "torchport-fix-locks")
    os.makedirs(folder, exist_ok=True)
    return FileLock(os.path.join(folder, hashlib.sha256(real.encode()).hexdigest()[:32] + ".lock"), timeout=60)


def _mp_context():
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def run(paths: Sequence[str | os.PathLike], options: Options | None = None, *,
        progress: Callable[[int, int], None] | None = None,
        on_skip: Callable[[str, str], None] | None = None) -> Report:
    """Scan (and optionally fix) every Python file under ``paths``.

    Args:
        progress: called as ``progress(done, total)`` after each file that had to be analysed (``total``
            counts those only: files the cache answered are done before the first call).
        on_skip: called as ``on_skip(path, reason)`` for each file or directory a walk leaves out, and for a
            named file an exclude pattern matches.

    Raises:
        FileNotFoundError: a path does not exist.
        torchport.migrate.catalog.UnknownRuleError: a select/ignore token matches no rule.
    """
    options = options or Options()
    if options.write and not options.write_roots:
        options = dataclasses.replace(options, write_roots=tree_roots(paths))
    t0 = time.perf_counter()
    from torchport.migrate.files import ALWAYS_SKIPPED

    files = [str(p) for p in iter_python_files(
        paths, exclude=options.exclude, respect_gitignore=options.respect_gitignore, on_skip=on_skip,
        extensions=dict(options.extensions), skipped_dirs=ALWAYS_SKIPPED if options.skip_default_dirs else frozenset())]
    cache = None
    if options.cache_dir is not None:
        from torchport.migrate.cache import Cache

        cache = Cache.open(options.cache_dir, select=options.select, ignore=options.ignore, emit=options.emit)
    if cache is None or not cache.known:
        from torchport.migrate import catalog

        catalog.ruleset(options.select, options.ignore)  # validate before starting workers
    done: dict[str, FileResult] = {}
    keys: dict[str, str] = {}
    if cache is not None:
        from torchport.migrate.cache import digest

        for f in files:
            try:
                with open(f, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue     # process_file reports it
            extra = _extra_ignores(data.decode("utf-8", "replace"), f, options) if b"noqa" in data or (
                options.per_file_ignores) else ()
            keys[f] = digest(data, extra if extra is not None else ("*",))
            hit = cache.get(keys[f], f)
            if hit is not None and (not options.fix or not hit.findings):
                done[f] = hit       # a fix of a file without findings has nothing to do
    todo = [f for f in files if f not in done]
    if todo:
        from torchport.migrate import catalog

        catalog.ruleset(options.select, options.ignore)   # loads the rules once, before any fork
    analysed, before, total = todo, len(done), len(todo)
    jobs = options.jobs or os.cpu_count() or 1
    if jobs > 1 and len(todo) >= _PARALLEL_MIN_FILES:
        light, todo, work = _split_by_work(todo, options)
        for f in light:        # a worker's round trip would cost more than the file
            done[f] = process_file(f, options)
            if progress is not None:
                progress(len(done) - before, total)
        if options.jobs is None and work < _PARALLEL_MIN_BYTES:
            jobs = 1
    if jobs == 1 or len(todo) < _PARALLEL_MIN_FILES:
        for f in todo:
            done[f] = process_file(f, options)
            if progress is not None:
                progress(len(done) - before, total)
    else:
        if _mp_context().get_start_method() == "fork":
            from torchport.migrate import engine  # noqa: F401 - forked workers share LibCST (~0.3 s to import)
        offset = len(done) - before
        done.update(_run_pool(todo, options, jobs, progress and (lambda n, _: progress(offset + n, total))))
    if cache is not None:
        for f in analysed:
            if f in keys and (not options.fix or not done[f].findings):
                cache.put(keys[f], done[f])
        cache.save()
    report = Report.from_results([done[f] for f in files], seconds=time.perf_counter() - t0)
    report.cached = cache.hits if cache is not None else 0
    return report


def _split_by_work(files: list[str], options: Options) -> tuple[list[str], list[str], int]:
    """``(light, heavy, characters in the heavy files)``: the Python files the rules' text prefilter rules out (no
    rule can fire in them: they cost a read and a search, less than a round trip to a worker), and the others -- a
    fix, a notebook, a file that cannot be read here and every file when there is no prefilter are heavy. An
    estimate only: either kind is analysed in full by :func:`process_file`."""
    if options.fix or _FULL_PASS_ONLY:
        return [], files, _PARALLEL_MIN_BYTES
    from torchport.migrate import catalog

    prefilter = catalog.ruleset(options.select, options.ignore).prefilter
    if prefilter is None:
        return [], files, _PARALLEL_MIN_BYTES
    extensions = dict(options.extensions)
    light: list[str] = []
    heavy: list[str] = []
    work = 0
    for f in files:
        try:
            with open(f, "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            text = None
        if text is None or language(f, extensions) != "python" or prefilter.search(text) is not None:
            heavy.append(f)
            work += _PARALLEL_MIN_BYTES if text is None else len(text)
        else:
            light.append(f)
    return light, heavy, work


def _run_pool(files: list[str], options: Options, jobs: int,
              progress: Callable[[int, int], None] | None = None) -> dict[str, FileResult]:
    """``process_file`` over ``files`` in worker processes. A worker killed by a file (a native parser
    crash, the OOM killer) must not cost the other files their results: whatever the broken pool did
    not return is processed again, one file per fresh process, and a file that kills its own process
    is reported as such -- one line for that file, every other file scanned (and written) as usual."""
    # biggest files first, so no worker is left with a huge file at the end
    import concurrent.futures
    import concurrent.futures.process

    order = sorted(files, key=lambda f: -_size(f))
    done: dict[str, FileResult] = {}
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=_mp_context(),
                                                    initializer=_init_worker, initargs=(options,)) as pool:
            futures = {pool.submit(process_file, f): f for f in order}
            for fut in concurrent.futures.as_completed(futures):
                try:
                    done[futures[fut]] = fut.result()
                except concurrent.futures.process.BrokenProcessPool:
                    pass
                if progress is not None:
                    progress(len(done), len(order))
    except concurrent.futures.process.BrokenProcessPool:
        pass
    for f in order:
        if f not in done:
            done[f] = _isolated(f, options)
    return done


def _isolated(path: str, options: Options) -> FileResult:
    """``process_file(path)`` in a process of its own; its death becomes this file's error."""
    import concurrent.futures
    import concurrent.futures.process

    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=_mp_context(),
                                                initializer=_init_worker, initargs=(options,)) as pool:
        try:
            return pool.submit(process_file, path).result()
        except concurrent.futures.process.BrokenProcessPool:
            return FileResult(path=path, error=FileError(
                path=path, message="the parser crashed on this file (its process died); nothing was changed in it"))


def _size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0
