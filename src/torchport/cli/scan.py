"""`torchport scan` / `fix`: find device-specific code and rewrite it portable (`rules` / `explain`: cli/rules.py).

Exit codes (CI can use them):

* ``scan``: 0 nothing found; 1 findings (0 with ``--exit-zero``); 6 a file could not be read or
  parsed (also with ``--exit-zero``: it never hides a file that was not analysed); 2 bad usage.
* ``fix``: with ``--diff`` (default) 1 when anything is found (nothing is written);
  with ``--write`` 1 when findings remain after the rewrite; with ``--check`` 1 when a fix
  would change a file (nothing is written; for CI), else 0; 6 a file could not be read, parsed
  or written (the others are still fixed, the summary still printed); 2 bad usage.
* ``rules`` / ``explain``: 0; ``explain`` 2 for an unknown rule.

Settings come from the closest ``torchport.toml`` or ``[tool.torchport]`` in a ``pyproject.toml``
(:mod:`torchport.migrate.config`); results are cached (:mod:`torchport.migrate.cache`, ``--no-cache``);
``-`` reads the source from stdin (``--stdin-filename`` names it in reports and for per-file ignores;
``fix - --write`` prints the fixed source on stdout).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import List, Optional

import typer

from torchport.cli._lint import Settings, extensions, run_linter, tokens
from torchport.cli._options import (ReportFile, format_option, json_option, output_option, parse_format,
                                    parse_reports, report_outputs, split_output, warn_deprecated,
                                    write_json, write_outputs)
from torchport.errors import ExitCode
from torchport.log import message_line

#: What ``scan`` / ``fix`` show (``--format`` / ``--output-format``) and write (``-o``).
FORMATS = ("text", "concise", "github", "json", "sarif", "csv")


def _fail(verb: str, exc: Exception) -> None:
    from torchport.cli._common import fail

    fail(verb, str(exc))     # one line, ExitCode.USAGE


def _exit(report, findings, *, exit_zero: bool = False, written: bool = True) -> None:
    """Files that could not be read, parsed or written (a report included): IO (6), even with
    ``--exit-zero``; else findings: FAILED (1) unless ``--exit-zero``; else 0."""
    if report.errors or not written:
        raise typer.Exit(int(ExitCode.IO))
    if findings and not exit_zero:
        raise typer.Exit(int(ExitCode.FAILED))


def _reports(verb: str, fmt_value: Optional[str], values: Optional[List[str]],
             json_out: Optional[Path]) -> tuple[Optional[str], list[ReportFile], bool]:
    """``--format`` and ``-o``, checked before any work: (terminal format or None, report files, stdout taken).

    The old spelling stays: ``--format X`` with exactly ONE ``-o FILE`` that has no ``FMT:`` prefix writes
    FILE in X whatever its suffix and shows no report, as before -- with a deprecation line naming the
    new spelling ``-o X:FILE``. (To show X and write files, give the files a prefix or two ``-o``.)
    """
    values = list(values or ())
    if fmt_value is not None and len(values) == 1 and values[0] != "-" and split_output(values[0])[0] is None:
        fmt = parse_format(verb, fmt_value, FORMATS)
        warn_deprecated(verb, f"--format {fmt_value} -o FILE",
                        f"-o {fmt}:{values[0]} (--format now chooses what the terminal shows)")
        outputs = [ReportFile(fmt, values[0], prefixed=True)]
        return None, outputs, report_outputs(verb, outputs, json_out)
    return parse_reports(verb, fmt_value, values, FORMATS, json_out)


def _emit(verb: str, report, fmt: Optional[str], outputs: list[ReportFile], json_out: Optional[Path], *,
          to_stdout: bool = False, stream=None) -> bool:
    """Show the report in ``fmt`` (None: not at all), write the ``-o`` files and ``--json``; False when a
    report file could not be written."""
    from torchport.migrate import render

    if to_stdout:
        stream = sys.stderr   # stdout carries a machine-readable report
    if fmt == "text":
        from torchport.log import console

        render.print_rich(report, console(file=stream or sys.stdout, highlight=False))
    elif fmt is not None:
        (stream or sys.stdout).write(render.render(report, fmt))
    written = write_outputs(verb, outputs, lambda f: render.render(report, f))
    write_json(json_out, render.to_json(report))
    return written


_PATHS = typer.Argument(None, help="Files or directories (default: the current directory); '-' reads stdin.")
_SELECT = typer.Option(None, "--select", help="Only these rule codes / prefixes / names (e.g. TP1,TP201; ALL).")
_EXTEND_SELECT = typer.Option(None, "--extend-select", help="Add these rule codes / prefixes / names to the "
                                                            "selection (e.g. TP901).")
_IGNORE = typer.Option(None, "--ignore", help="Skip these rule codes / prefixes / names.")
_EXCLUDE = typer.Option(None, "--exclude", help="gitignore-style pattern of paths to skip (repeatable; it applies to "
                                                "named files too, as ruff's --force-exclude).")
_NO_GITIGNORE = typer.Option(False, "--no-gitignore", help="Also scan files that .gitignore excludes.")
_JOBS = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count for 2 MB or more of candidate files, else 1).")
_FORMAT = format_option(FORMATS, also=("--output-format",))
_CONFIG = typer.Option(None, "--config", metavar="FILE", help="Read the settings from this torchport.toml or "
                       "pyproject.toml (default: the closest one, from the first path upward).")
_ISOLATED = typer.Option(False, "--isolated", help="Ignore every settings file (command-line options only).")
_STDIN_FILENAME = typer.Option(None, "--stdin-filename", metavar="PATH",
                               help="The name of the source read from stdin ('-'): shown in reports, matched by "
                                    "per-file-ignores, the start of the config search.")
_NO_CACHE = typer.Option(False, "--no-cache", help="Analyse every file, reading and writing no cache.")
_CACHE_DIR = typer.Option(None, "--cache-dir", metavar="DIR", help="The scan cache's folder (default: "
                          ".torchport_cache beside the settings file, else here; also TORCHPORT_CACHE_DIR).")
_EXTENSION = typer.Option(None, "--extension", metavar="EXT:LANG",
                          help="Also take files with this suffix in a directory walk, as python or ipynb "
                               "(e.g. pyw:python, ipy:ipynb; repeatable).")
_STATISTICS = typer.Option(False, "--statistics", help="Show a count per rule instead of each finding.")
_SHOW_FIXES = typer.Option(False, "--show-fixes", help="List the fixes (applied, or available) per file and rule.")
_OUTPUT = output_option(
    FORMATS, extra="(Deprecated: --format X with one -o FILE and no FMT: writes FILE in X and shows nothing.)")
_JSON = json_option("the report too")


def _settings(config, isolated, stdin_filename, no_cache, cache_dir, extension, extend_select, verb) -> Settings:
    return Settings(config=config, isolated=isolated, stdin_filename=stdin_filename, no_cache=no_cache,
                    cache_dir=cache_dir, extensions=extensions(verb, extension), extend_select=tokens(extend_select))


def _show_fixes(report, stream) -> None:
    """``--show-fixes``: per file, the rules a fix rewrote (or, in a scan or a dry run, could rewrite)."""
    import collections

    done = report.fixed or report.would_fix
    rows = done if done else [f for f in report.findings if f.fix_safety != "none"]
    word = "fixed" if report.fixed else ("would fix" if report.would_fix else "fixable")
    by_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for f in rows:
        by_file[f.path][(f.code, f.name)] += 1
    stream.write(f"{sum(len(c) and sum(c.values()) for c in by_file.values())} finding(s) {word}"
                 + (":\n" if by_file else "\n"))
    for path in sorted(by_file):
        stream.write(f"  {path}:\n")
        for (code, name), n in sorted(by_file[path].items()):
            stream.write(f"    {n} x {code} ({name})\n")


def _nothing_written(report):
    """The report of a ``fix --diff`` / ``--check`` run: nothing was written, so no finding is "fixed"; the
    renderers say "would fix" for those the rewrite has (:attr:`~torchport.migrate.finding.Report.dry_run`)."""
    return dataclasses.replace(report, dry_run=True, fixing=True)


def _check_report(report, *, lines: bool = True, written: bool = True) -> None:
    """``fix --check``: name the files a fix would change (``lines``: on stdout); exit 1 when there is one,
    6 when a file failed or a report file could not be written."""
    changed = [r for r in report.results if r.fixed_source is not None and r.source is not None]
    n_fixes = sum(1 for f in report.findings if f.fixed)
    for res in changed if lines else ():
        sys.stdout.write(f"would fix {res.path}\n")
    for err in report.errors:
        sys.stderr.write(message_line("error", f"{err.path}: {err.message}", "fix") + "\n")
    if changed:
        sys.stderr.write(f"{n_fixes} fix(es) in {len(changed)} file(s) of {report.files}; "
                         "apply them with `torchport fix --write`\n")
    else:
        sys.stderr.write(f"nothing to fix in {report.files} file(s)\n")
    raise typer.Exit(int(ExitCode.IO) if report.errors or not written else (1 if changed else 0))


def register(app: typer.Typer) -> None:
    """Attach ``scan`` and ``fix`` to the torchport app (``rules`` / ``explain``: :mod:`torchport.cli.rules`)."""

    @app.command("scan")
    def scan(
        paths: Optional[List[Path]] = _PATHS,
        select: Optional[List[str]] = _SELECT,
        extend_select: Optional[List[str]] = _EXTEND_SELECT,
        ignore: Optional[List[str]] = _IGNORE,
        exclude: Optional[List[str]] = _EXCLUDE,
        no_gitignore: bool = _NO_GITIGNORE,
        jobs: Optional[int] = _JOBS,
        fmt: Optional[str] = _FORMAT,
        output: Optional[List[str]] = _OUTPUT,
        json_out: Optional[Path] = _JSON,
        exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when something is found (files that could not be read still exit 6)."),
        config: Optional[Path] = _CONFIG,
        isolated: bool = _ISOLATED,
        stdin_filename: Optional[str] = _STDIN_FILENAME,
        no_cache: bool = _NO_CACHE,
        cache_dir: Optional[Path] = _CACHE_DIR,
        extension: Optional[List[str]] = _EXTENSION,
        statistics: bool = _STATISTICS,
        show_fixes: bool = _SHOW_FIXES,
        add_noqa: bool = typer.Option(False, "--add-noqa", help="Append `# noqa: CODE` to every line with a finding "
                                                                "(files rewritten atomically), and report nothing."),
    ) -> None:
        """Find code that only runs on one device type (CUDA), with a rule code per construct.

        Example: torchport scan src --select TP1,TP2 -o scan.sarif -o scan.csv
        """
        shown, outputs, to_stdout = _reports("scan", fmt, output, json_out)
        settings = _settings(config, isolated, stdin_filename, no_cache, cache_dir, extension, extend_select, "scan")
        report = run_linter("scan", paths, select, ignore, exclude, no_gitignore, jobs, settings=settings)
        if add_noqa:
            from torchport.migrate.noqa import add_noqa as add

            if [str(p) for p in paths or ()] == ["-"]:
                _fail("scan", ValueError("--add-noqa rewrites files; it cannot take '-' (stdin)"))
            added, errors = add(report)
            for err in errors:
                sys.stderr.write(message_line("error", err, "scan") + "\n")
            sys.stderr.write(f"added {added} noqa comment(s)\n")
            raise typer.Exit(int(ExitCode.IO) if errors or report.errors else 0)
        if statistics:
            from torchport.migrate import render

            (sys.stderr if to_stdout else sys.stdout).write(render.to_statistics(report))
            shown = None if not to_stdout else shown
        written = _emit("scan", report, shown, outputs, json_out, to_stdout=to_stdout)
        if show_fixes:
            _show_fixes(report, sys.stderr if to_stdout or shown not in (None, "text") else sys.stdout)
        _exit(report, report.remaining, exit_zero=exit_zero, written=written)

    @app.command("fix")
    def fix(
        paths: Optional[List[Path]] = _PATHS,
        write: bool = typer.Option(False, "--write/--diff", help="Rewrite files in place (default: show a diff)."),
        unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply fixes that can change behaviour."),
        select: Optional[List[str]] = _SELECT,
        extend_select: Optional[List[str]] = _EXTEND_SELECT,
        ignore: Optional[List[str]] = _IGNORE,
        exclude: Optional[List[str]] = _EXCLUDE,
        no_gitignore: bool = _NO_GITIGNORE,
        jobs: Optional[int] = _JOBS,
        fmt: Optional[str] = _FORMAT,
        output: Optional[List[str]] = _OUTPUT,
        json_out: Optional[Path] = _JSON,
        check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when a fix would change a file "
                                                          "(for CI), 0 otherwise."),
        config: Optional[Path] = _CONFIG,
        isolated: bool = _ISOLATED,
        stdin_filename: Optional[str] = _STDIN_FILENAME,
        emit: Optional[str] = typer.Option(
            None, "--emit", metavar="torchport|torch",
            help="What the fixed code calls: 'torchport' (the torchport runtime; default) or 'torch' (torch core "
                 "only, torch >= 2.7, where torch has the API: torch.accelerator, torch.amp; the rest stays on "
                 "torchport). Default: emit in the settings file, else torchport."),
        no_cache: bool = _NO_CACHE,
        cache_dir: Optional[Path] = _CACHE_DIR,
        extension: Optional[List[str]] = _EXTENSION,
        show_fixes: bool = _SHOW_FIXES,
    ) -> None:
        """Rewrite device-specific code into device-agnostic code (torchport runtime / torch core).

        Without --write, prints a unified diff and changes nothing (the report then counts what --write
        would fix; nothing is called fixed). Fixes keep formatting and comments, add `import torchport`
        once, and are idempotent. With '-' (stdin), --write prints the fixed source on stdout. Stdout carries
        one thing: the diff (with the text report on stderr), or the report asked for with --format / -o - /
        --json - (whose JSON then holds the diff).

        Example: torchport fix train.py --write --unsafe-fixes -o changes.csv
        """
        from torchport.migrate.config import EMITS
        from torchport.migrate.runner import unified_diff

        if emit is not None and emit not in EMITS:
            from torchport.cli._common import fail

            fail("fix", f"--emit {emit}: choose one of {', '.join(EMITS)}")
        shown, outputs, to_stdout = _reports("fix", fmt, output, json_out)
        if check and write:
            from torchport.cli._common import fail

            fail("fix", "--check writes nothing; drop --write (or --check)")
        settings = _settings(config, isolated, stdin_filename, no_cache, cache_dir, extension, extend_select, "fix")
        stdin = [str(p) for p in paths or ()] == ["-"]
        if check:
            report = _nothing_written(run_linter("fix", paths, select, ignore, exclude, no_gitignore, jobs, fix=True,
                                                 unsafe=unsafe_fixes, write=False, settings=settings, emit=emit))
            # the report files (-o, --json) as without --check; a non-text --format replaces the "would fix" lines
            shown_check = None if shown == "text" else shown
            written = _emit("fix", report, shown_check, outputs, json_out, to_stdout=to_stdout)
            if show_fixes:
                _show_fixes(report, sys.stderr)
            _check_report(report, lines=shown_check is None and not to_stdout, written=written)
        report = run_linter("fix", paths, select, ignore, exclude, no_gitignore, jobs, fix=True, unsafe=unsafe_fixes,
                            write=write and not stdin, settings=settings, emit=emit)
        report.fixing = True
        if stdin and write:   # like ruff: the fixed source (or the source as it was) on stdout
            res = report.results[0] if report.results else None
            if res is not None:
                sys.stdout.write(res.fixed_source if res.fixed_source is not None else res.source)
            written = _emit("fix", report, shown, outputs, json_out, to_stdout=to_stdout, stream=sys.stderr)
            if show_fixes:
                _show_fixes(report, sys.stderr)
            _exit(report, report.remaining, written=written)
            return
        if not write:
            report = _nothing_written(report)
            if shown == "text" and not to_stdout:   # the diff is what stdout shows; the report goes to stderr
                for res in report.results:
                    if res.fixed_source is not None and res.source is not None:
                        sys.stdout.write(unified_diff(res.path, res.source, res.fixed_source))
        written = _emit("fix", report, shown, outputs, json_out, to_stdout=to_stdout,
                        stream=sys.stderr if not write and shown == "text" else None)
        if show_fixes:
            _show_fixes(report, sys.stderr)
        _exit(report, report.findings if not write else report.remaining, written=written)
