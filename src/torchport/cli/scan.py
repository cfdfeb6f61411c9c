"""`torchport scan` / `fix` / `rules` / `explain`: find device-specific code and rewrite it portable.

Exit codes (CI can use them):

* ``scan``: 0 nothing found; 1 findings (0 with ``--exit-zero``); 6 a file could not be read or
  parsed (also with ``--exit-zero``: it never hides a file that was not analysed); 2 bad usage.
* ``fix``: with ``--diff`` (default) 1 when anything is found (nothing is written);
  with ``--write`` 1 when findings remain after the rewrite; with ``--check`` 1 when a fix
  would change a file (nothing is written; for CI), else 0; 6 a file could not be read, parsed
  or written (the others are still fixed, the summary still printed); 2 bad usage.
* ``rules`` / ``explain``: 0; ``explain`` 2 for an unknown rule.

Settings come from ``[tool.torchport]`` in the closest ``pyproject.toml`` (:mod:`torchport.migrate.config`);
``-`` reads the source from stdin (``--stdin-filename`` names it in reports and for per-file ignores;
``fix - --write`` prints the fixed source on stdout).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import List, Optional

import typer

from torchport.cli._options import (ReportFile, format_option, json_option, output_option, parse_format,
                                    parse_reports, report_outputs, split_output, warn_deprecated,
                                    write_json, write_outputs)
from torchport.errors import ExitCode
from torchport.log import message_line

#: What ``scan`` / ``fix`` show (``--format`` / ``--output-format``) and write (``-o``).
FORMATS = ("text", "concise", "github", "json", "sarif", "csv")


def _tokens(values: Optional[List[str]]) -> tuple[str, ...]:
    """Repeatable options that also accept comma-separated lists."""
    return tuple(t.strip() for v in (values or []) for t in v.split(",") if t.strip())


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


def _stdin_text(verb: str) -> str:
    """The source on stdin (``-``); a usage error when stdin is a terminal (nothing was piped in)."""
    if sys.stdin is None or sys.stdin.isatty():
        from torchport.cli._common import fail

        fail(verb, "'-' reads the source from stdin, but nothing is piped in; e.g. cat f.py | torchport "
                   f"{verb} - --stdin-filename f.py")
    return sys.stdin.read()


def _run(paths, select, ignore, exclude, no_gitignore, jobs, *, fix=False, unsafe=False, write=False, verb="scan",
         settings=None, emit=None):
    """Run the scanner over ``paths`` (default ``.``; ``-`` = stdin, shown as ``settings.stdin_filename``).

    ``settings`` (:class:`_Settings`) carries the config file choice; the file's values merge with the
    flags: ``--select`` replaces ``select``, ``--ignore`` / ``--exclude`` add, ``--unsafe-fixes`` or the file's
    ``unsafe-fixes`` turns unsafe fixes on, ``--emit`` replaces ``emit``.
    """
    from torchport.errors import ConfigError
    from torchport.migrate.catalog import UnknownRuleError
    from torchport.migrate.config import load_config
    from torchport.migrate.runner import Options, run, run_source

    settings = settings or _Settings()
    names = [str(p) for p in paths or ()] or ["."]
    if "-" in names and len(names) > 1:
        _fail(verb, ValueError("'-' (stdin) cannot be combined with other paths; give one or the other"))
    stdin = names == ["-"]
    if settings.stdin_filename is not None and not stdin:
        _fail(verb, ValueError("--stdin-filename names the source read from stdin; give '-' as the path"))
    shown_as = settings.stdin_filename or "-"
    try:
        cfg = load_config([shown_as] if stdin else names, config=settings.config, isolated=settings.isolated)
        options = Options(select=_tokens(select) or cfg.select, ignore=cfg.ignore + _tokens(ignore),
                          exclude=cfg.extend_exclude + _tokens(exclude), respect_gitignore=not no_gitignore,
                          jobs=jobs, fix=fix, unsafe_fixes=unsafe or cfg.unsafe_fixes, write=write,
                          per_file_ignores=cfg.per_file_ignores, emit=emit or cfg.emit or "torchport")
        if stdin:
            from torchport.migrate import catalog

            catalog.ruleset(options.select, options.ignore)   # a bad code is a usage error before reading stdin
            text = _stdin_text(verb)
            report = run_source(text, shown_as, options)
            for res in report.results:   # kept for `fix - --write`, which prints the source back
                res.source = text if res.source is None else res.source
            return report
        return run(names, options)
    except (UnknownRuleError, FileNotFoundError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise      # the guard prints it (exit 2)
        _fail(verb, exc)


@dataclasses.dataclass(frozen=True)
class _Settings:
    """Where the settings come from and what stdin is called (``--config``, ``--isolated``, ``--stdin-filename``)."""

    config: Optional[Path] = None
    isolated: bool = False
    stdin_filename: Optional[str] = None


_PATHS = typer.Argument(None, help="Files or directories (default: the current directory); '-' reads stdin.")
_SELECT = typer.Option(None, "--select", help="Only these rule codes / prefixes / names (e.g. TP1,TP201; ALL).")
_IGNORE = typer.Option(None, "--ignore", help="Skip these rule codes / prefixes / names.")
_EXCLUDE = typer.Option(None, "--exclude", help="gitignore-style pattern of paths to skip (repeatable).")
_NO_GITIGNORE = typer.Option(False, "--no-gitignore", help="Also scan files that .gitignore excludes.")
_JOBS = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count).")
_FORMAT = format_option(FORMATS, also=("--output-format",))
_CONFIG = typer.Option(None, "--config", metavar="FILE", help="Read [tool.torchport] from this pyproject.toml "
                       "(default: the closest one with that table, from the first path upward).")
_ISOLATED = typer.Option(False, "--isolated", help="Ignore every pyproject.toml (command-line options only).")
_STDIN_FILENAME = typer.Option(None, "--stdin-filename", metavar="PATH",
                               help="The name of the source read from stdin ('-'): shown in reports, matched by "
                                    "per-file-ignores, the start of the config search.")
_OUTPUT = output_option(
    FORMATS, extra="(Deprecated: --format X with one -o FILE and no FMT: writes FILE in X and shows nothing.)")
_JSON = json_option("the report too")


def _nothing_written(report):
    """The report of a ``fix --diff`` / ``--check`` run: nothing was written, so no finding is "fixed"; the
    renderers say "would fix" for those the rewrite has (:attr:`~torchport.migrate.finding.Report.dry_run`)."""
    return dataclasses.replace(report, dry_run=True)


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
    """Attach ``scan``, ``fix``, ``rules`` and ``explain`` to the torchport app."""

    @app.command("scan")
    def scan(
        paths: Optional[List[Path]] = _PATHS,
        select: Optional[List[str]] = _SELECT,
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
    ) -> None:
        """Find code that only runs on one device type (CUDA), with a rule code per construct.

        Example: torchport scan src --select TP1,TP2 -o scan.sarif -o scan.csv
        """
        shown, outputs, to_stdout = _reports("scan", fmt, output, json_out)
        report = _run(paths, select, ignore, exclude, no_gitignore, jobs,
                      settings=_Settings(config, isolated, stdin_filename))
        written = _emit("scan", report, shown, outputs, json_out, to_stdout=to_stdout)
        _exit(report, report.remaining, exit_zero=exit_zero, written=written)

    @app.command("fix")
    def fix(
        paths: Optional[List[Path]] = _PATHS,
        write: bool = typer.Option(False, "--write/--diff", help="Rewrite files in place (default: show a diff)."),
        unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply fixes that can change behaviour."),
        select: Optional[List[str]] = _SELECT,
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
                 "torchport). Default: emit in [tool.torchport], else torchport."),
    ) -> None:
        """Rewrite device-specific code into device-agnostic code (torchport runtime / torch core).

        Without --write, prints a unified diff and changes nothing (the report then counts what --write
        would fix; nothing is called fixed). Fixes keep formatting and comments, add `import torchport`
        once, and are idempotent. With '-' (stdin), --write prints the fixed source on stdout.

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
        settings = _Settings(config, isolated, stdin_filename)
        stdin = [str(p) for p in paths or ()] == ["-"]
        if check:
            report = _nothing_written(_run(paths, select, ignore, exclude, no_gitignore, jobs, fix=True,
                                           unsafe=unsafe_fixes, write=False, verb="fix", settings=settings,
                                           emit=emit))
            # the report files (-o, --json) as without --check; a non-text --format replaces the "would fix" lines
            shown_check = None if shown == "text" else shown
            written = _emit("fix", report, shown_check, outputs, json_out, to_stdout=to_stdout)
            _check_report(report, lines=shown_check is None and not to_stdout, written=written)
        report = _run(paths, select, ignore, exclude, no_gitignore, jobs, fix=True, unsafe=unsafe_fixes,
                      write=write and not stdin, verb="fix", settings=settings, emit=emit)
        if stdin and write:   # like ruff: the fixed source (or the source as it was) on stdout
            res = report.results[0] if report.results else None
            if res is not None:
                sys.stdout.write(res.fixed_source if res.fixed_source is not None else res.source)
            written = _emit("fix", report, shown, outputs, json_out, to_stdout=to_stdout, stream=sys.stderr)
            _exit(report, report.remaining, written=written)
            return
        if not write:
            for res in report.results:
                if res.fixed_source is not None and res.source is not None:
                    sys.stdout.write(unified_diff(res.path, res.source, res.fixed_source))
            report = _nothing_written(report)
        written = _emit("fix", report, shown, outputs, json_out, to_stdout=to_stdout,
                        stream=sys.stderr if not write else None)
        _exit(report, report.findings if not write else report.remaining, written=written)

    @app.command("rules")
    def rules(
        docs: Optional[Path] = typer.Option(None, "--docs", help="Write one Markdown page per rule into DIR."),
        json_out: Optional[Path] = _JSON,
    ) -> None:
        """List every scanner rule: code, name, severity, fix safety, default, what it finds."""
        from rich.table import Table

        from torchport.log import console
        from torchport.migrate import catalog
        from torchport.migrate.docs import write_docs

        all_rules = catalog.rules()
        to_stdout = json_out is not None and str(json_out) == "-"
        if docs is not None:
            written = write_docs(docs, list(all_rules))
            typer.echo(f"wrote {len(written)} pages to {docs}", err=to_stdout)
        else:
            table = Table(show_edge=False)
            for col in ("code", "name", "severity", "fix", "default", "what it finds"):
                table.add_column(col, overflow="fold")
            for r in all_rules:
                table.add_row(r.code, r.name, r.severity, r.fix, "on" if r.default_enabled else "off", r.summary)
            console(stderr=to_stdout).print(table)
        rows = [{"code": r.code, "name": r.name, "severity": r.severity, "fix": r.fix,
                 "default": r.default_enabled, "summary": r.summary} for r in all_rules]
        write_json(json_out, rows)

    @app.command("explain")
    def explain(code: str = typer.Argument(..., help="A rule code (TP101) or name (cuda-method).")) -> None:
        """Show one rule's page: what it does, why it matters, example, what to use instead, fix safety."""
        from rich.console import Console
        from rich.markdown import Markdown

        from torchport.migrate import catalog
        from torchport.migrate.docs import rule_page

        try:
            rule = catalog.get(code)
        except catalog.UnknownRuleError as exc:
            _fail("explain", exc)
        console = Console()
        if console.is_terminal:
            console.print(Markdown(rule_page(rule)))
        else:
            sys.stdout.write(rule_page(rule))
