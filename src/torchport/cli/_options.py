"""The one CLI vocabulary: option factories every verb uses, deprecated aliases, and help rendering.

Every verb spells the same idea the same way (see the table in the README):

* ``--batch-size``, ``--image-size``, ``--num-classes``;
* ``--device auto|<backend>[:i]`` -- the backend list in its help comes from the registry, default
  ``auto`` (= ``TORCHPORT_DEVICE`` when set, else the first available backend);
* ``--precision fp32|fp16|bf16|auto|amp`` -- validated by :func:`parse_precision` (one parser);
* ``--json FILE`` with ``-`` meaning stdout (:func:`write_json`);
* ``--require-accelerator``;
* report formats, for every verb that writes a report: ``--format FMT`` (what is shown on the terminal,
  default ``text``) and ``--output/-o [FMT:]FILE`` (repeatable report files; the format from ``FMT:``, else
  from the suffix through :data:`SUFFIX_FORMATS`) -- :func:`format_option`, :func:`output_option`,
  :func:`report_outputs`, :func:`write_outputs`.

A renamed flag keeps its old spelling as a hidden option; :func:`renamed` merges the two and prints
one deprecation line. :func:`normalise_help` makes ``--help`` look the same whatever typer version
is installed (plain text, no rich markup, explicit metavars, none on boolean flags).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Iterable, Optional, Sequence

import typer

from torchport._json import write_json
from torchport.cli._common import fail

__all__ = [
    "PRECISIONS", "device_help", "device_option", "device_arg", "precision_option", "parse_precision",
    "json_option", "write_json", "require_accelerator_option", "alias", "renamed", "warn_deprecated",
    "normalise_help", "MARKUP", "preset_arg",
    "REPORT_FORMATS", "SUFFIX_FORMATS", "ReportFile", "format_option", "output_option", "parse_format",
    "suffix_format", "split_output", "parse_outputs", "report_outputs", "parse_reports", "write_outputs",
]

#: typer's ``rich_markup_mode`` for every app: plain text, so ``[a|b]`` in a help string is printed as is.
MARKUP = None


def _precisions() -> tuple[str, ...]:
    from torchport.backends.spec import PRECISIONS

    return PRECISIONS


def __getattr__(name: str) -> Any:
    if name == "PRECISIONS":     # read from the backend records on first use: `torchport scan` never needs them
        return _precisions()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def device_help() -> str:
    """``--device`` help text, listing the registered backends in auto-selection order."""
    from torchport.backends import registry

    names = " | ".join(registry.names())
    return (f"auto | {names}, optionally :INDEX (e.g. {registry.names()[0]}:1). "
            "auto = TORCHPORT_DEVICE when set, else the first available backend in that order.")


def device_option(**kw: Any) -> Any:
    """``--device`` (default ``auto``)."""
    return typer.Option("auto", "--device", metavar="DEVICE", help=device_help(), **kw)


def device_arg(value: Optional[str]) -> Optional[str]:
    """What to pass to :func:`torchport.select_device`: None for ``auto`` (so ``TORCHPORT_DEVICE`` applies)."""
    return None if value is None or value.strip().lower() == "auto" else value


def precision_option(default: Optional[str], *, many: bool = False, help: str = "") -> Any:  # noqa: A002
    """``--precision`` (one value, or a comma-separated list with ``many``)."""
    values = "|".join(_precisions())
    text = (help + " " if help else "") + (f"Comma-separated list of {values}" if many else values)
    text += "; amp = the backend's low precision (bf16 or fp16), auto = that where it is fast, else fp32."
    return typer.Option(default, "--precision", metavar="PRECISION", help=text)


def parse_precision(verb: str, value: Optional[str], *, many: bool = False) -> Any:
    """Validate ``--precision`` (lower-cased); a usage error names the allowed values."""
    if value is None:
        return None
    items = [v.strip().lower() for v in value.split(",")] if many else [value.strip().lower()]
    bad = [v for v in items if v not in _precisions()]
    if bad or not items:
        fail(verb, f"--precision {value!r}: {bad[0] if bad else value!r} is not one of {' | '.join(_precisions())}"
                   + (" (a comma-separated list, baseline first)" if many else ""))
    return tuple(items) if many else items[0]


def json_option(what: str = "the report") -> Any:
    """``--json FILE`` (``-`` = stdout); a URL is refused in one line while the command line is parsed."""
    return typer.Option(None, "--json", metavar="FILE", help=f"Write {what} as JSON to FILE ('-' for stdout).",
                        callback=_local_json)


def _local_json(ctx: typer.Context, value: Any) -> Any:
    from torchport.errors import ConfigError
    from torchport.paths import check

    try:
        check(value if value is not None and str(value) != "-" else None, option="--json")
    except ConfigError as exc:
        fail(ctx.command_path.split(" ", 1)[-1], str(exc))
    return value


def require_accelerator_option(default: Optional[bool] = None, *, extra: str = "") -> Any:
    """``--require-accelerator`` (``--allow-cpu`` to override TORCHPORT_REQUIRE_ACCELERATOR)."""
    return typer.Option(default, "--require-accelerator/--allow-cpu",
                        help="Fail (exit 7) instead of running on CPU when no accelerator is found "
                             f"(default: TORCHPORT_REQUIRE_ACCELERATOR).{extra}")


def alias(old: str, *more: str) -> Any:
    """A hidden option for a renamed flag (merge it with :func:`renamed`)."""
    return typer.Option(None, old, *more, hidden=True)


def warn_deprecated(verb: str, old: str, new: str) -> None:
    """One line on stderr: the old spelling still works, the new one is the name to use."""
    typer.echo(f"torchport {verb}: warning: {old} is deprecated; use {new}", err=True)


def renamed(verb: str, new: str, value: Any, old: str, old_value: Any, *, default: Any = None) -> Any:
    """The value of ``new``, taken from the deprecated ``old`` spelling when only that was given."""
    if old_value is None:
        return value
    warn_deprecated(verb, old, new)
    if value is not None and value != default and value != old_value:
        fail(verb, f"{old} and {new} are the same option; give only {new}")
    return old_value


def preset_arg(verb: str, name: Optional[str]) -> Optional[str]:
    """Map a deprecated preset name (``seed``) to its new name, with one warning line."""
    from torchport.workload import PRESET_ALIASES

    if name in PRESET_ALIASES:
        warn_deprecated(verb, f"--preset {name}", f"--preset {PRESET_ALIASES[name]}")
        return PRESET_ALIASES[name]
    return name


# -- report formats: --format FMT (the terminal) and --output/-o [FMT:]FILE (files), the same in every verb --

#: Every report format a verb can show or write; each verb declares the ones it supports
#: (``none`` = show nothing, for the terminal only).
REPORT_FORMATS = ("text", "json", "sarif", "csv", "junit", "markdown", "html", "none")

#: The one suffix table: a report file's format from its name (the longest matching suffix wins).
SUFFIX_FORMATS = {".json": "json", ".sarif": "sarif", ".sarif.json": "sarif", ".csv": "csv", ".xml": "junit",
                  ".html": "html", ".htm": "html", ".md": "markdown", ".txt": "text"}


@dataclasses.dataclass(frozen=True)
class ReportFile:
    """One ``-o`` value: the format to write and where (``-`` = stdout); ``prefixed`` when given as FMT:FILE."""

    fmt: str
    path: str
    prefixed: bool = False

    @property
    def to_stdout(self) -> bool:
        return self.path == "-"


def _file_formats(formats: Sequence[str]) -> list[str]:
    return [f for f in formats if f != "none"]


def _suffixes(formats: Sequence[str]) -> list[str]:
    return [s for s, f in SUFFIX_FORMATS.items() if f in formats]


def format_option(formats: Sequence[str], *, where: str = "on the terminal (stdout)", also: Sequence[str] = ()) -> Any:
    """``--format FMT`` (and the spellings in ``also``, e.g. ruff's ``--output-format``): the report shown
    ``where``, one of ``formats`` (None = ``text``, see :func:`parse_format`)."""
    return typer.Option(None, "--format", *also, metavar="FMT",
                        help=f"The report shown {where}: {' | '.join(formats)} (default text)"
                             + ("; none = no report." if "none" in formats else "."))


def output_option(formats: Sequence[str], *, extra: str = "") -> Any:
    """``--output/-o [FMT:]FILE``, repeatable: report files in any of ``formats``."""
    files = _file_formats(formats)
    return typer.Option(None, "--output", "-o", metavar="[FMT:]FILE",
                        help=f"Also write the report to FILE (repeatable; '-' = stdout). Its format is FMT "
                             f"({' | '.join(files)}), else comes from the suffix ({' '.join(_suffixes(files))})."
                             + (f" {extra}" if extra else ""))


def parse_format(verb: str, value: Optional[str], formats: Sequence[str]) -> str:
    """The ``--format`` value (``text`` when not given); one usage line naming the supported ones otherwise."""
    fmt = "text" if value is None else value.strip().lower()
    if fmt not in formats:
        fail(verb, f"unknown --format {value!r}; {verb} shows {' | '.join(formats)}")
    return fmt


def suffix_format(path: str) -> Optional[str]:
    """The report format a file name's suffix names (:data:`SUFFIX_FORMATS`), or None."""
    name = os.path.basename(str(path)).lower()
    for suffix in sorted(SUFFIX_FORMATS, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            return SUFFIX_FORMATS[suffix]
    return None


def split_output(value: str) -> tuple[Optional[str], str]:
    """``json:r.out`` -> ("json", "r.out"); a value without a word prefix (``r.json``, ``C:\\r.json``) -> (None, value)."""
    head, sep, rest = value.partition(":")
    if sep and len(head) > 1 and head.isalpha():
        return head.lower(), rest
    return None, value


def parse_outputs(verb: str, values: Optional[Iterable[str]], formats: Sequence[str]) -> list[ReportFile]:
    """Every ``-o`` value as a :class:`ReportFile`, or one usage line (exit 2) for the first bad one.

    The format is the ``FMT:`` prefix, else the file's suffix; either must be one ``verb`` writes.
    """
    from torchport.errors import ConfigError
    from torchport.paths import check

    files = _file_formats(formats)
    spelling = f"name the format as -o FMT:FILE (FMT: {' | '.join(files)})"
    out = []
    for value in values or ():
        fmt, path = split_output(value)
        try:   # a report file is local: a URL is refused here, not written as a folder named 's3:'
            check(path if path and path != "-" else None, option="-o")
        except ConfigError as exc:
            fail(verb, str(exc))
        if fmt is not None:
            if fmt not in files:
                fail(verb, f"-o {value}: {verb} does not write {fmt!r}; it writes {' | '.join(files)}")
            if not path:
                fail(verb, f"-o {value}: no file after {fmt}:; give -o {fmt}:FILE ('-' = stdout)")
            out.append(ReportFile(fmt, path, prefixed=True))
            continue
        fmt = suffix_format(path) if path != "-" else None
        if fmt is None or fmt not in files:
            what = "stdout has no suffix" if path == "-" else (
                f"{verb} does not write {fmt!r}" if fmt else "the suffix names no report format")
            fail(verb, f"-o {value}: {what}; {verb} writes {' '.join(_suffixes(files))}, or {spelling}")
        out.append(ReportFile(fmt, path))
    return out


def report_outputs(verb: str, outputs: Sequence[ReportFile], json_out: Any = None) -> bool:
    """Check that at most one report goes to stdout (``--json -`` counts); True when one does."""
    from torchport.errors import ConfigError
    from torchport.paths import check

    try:
        check(json_out if json_out is not None and str(json_out) != "-" else None, option="--json")
    except ConfigError as exc:
        fail(verb, str(exc))
    n = sum(o.to_stdout for o in outputs) + (json_out is not None and str(json_out) == "-")
    if n > 1:
        fail(verb, "only one report can go to stdout ('-'); write the others to files")
    return n == 1


def parse_reports(verb: str, fmt_value: Optional[str], values: Optional[Iterable[str]], formats: Sequence[str],
                  json_out: Any = None, *, extra: Sequence[ReportFile] = ()) -> tuple[str, list[ReportFile], bool]:
    """A verb's report options, checked before any work: ``(shown format, report files, stdout taken)``.

    :func:`parse_format` + :func:`parse_outputs` (+ ``extra`` files, e.g. from deprecated flags) +
    :func:`report_outputs` -- the sequence every verb that writes a report runs.
    """
    shown = parse_format(verb, fmt_value, formats)
    outputs = parse_outputs(verb, values, formats) + list(extra)
    return shown, outputs, report_outputs(verb, outputs, json_out)


def write_outputs(verb: str, outputs: Sequence[ReportFile], render: Callable[[str], str], *,
                  announce: Optional[Callable[[str], None]] = None,
                  path_for: Optional[Callable[[str], str]] = None) -> bool:
    """Write each report (atomically; ``-`` = stdout) and announce ``wrote PATH``
    (:func:`torchport._json.write_reports`, which library code uses too).

    A file that cannot be written is one error line; the others are still written. Returns True
    when every report was written.

    Args:
        render: format name -> report text.
        announce: where ``wrote PATH`` goes (default: stderr).
        path_for: maps each path before writing (``run`` adds ``.rankN`` under torchrun).
    """
    from torchport._json import write_reports

    return write_reports(verb, outputs, render, announce=announce or (lambda line: typer.echo(line, err=True)),
                         path_for=path_for)


def normalise_help(command: Any) -> Any:
    """Make ``--help`` independent of the typer version: plain text (no rich markup, so ``[a|b]``
    survives), and an explicit metavar on every valued option (none on boolean flags)."""
    for cmd in _walk(command):
        if hasattr(cmd, "rich_markup_mode"):
            cmd.rich_markup_mode = MARKUP
        for param in getattr(cmd, "params", []):
            if getattr(param, "param_type_name", "") != "option" or param.is_flag or param.count:
                continue
            if param.metavar is None:
                param.metavar = _metavar(param)
    return command


def _walk(command: Any):
    yield command
    for sub in (getattr(command, "commands", None) or {}).values():
        yield from _walk(sub)


def _metavar(param: Any) -> str:
    kind = getattr(param, "type", None)          # click's ParamType (typer < 0.20 and click itself)
    name = getattr(kind, "name", "") if kind is not None else ""
    if not name and hasattr(param, "bare_type"):  # typer's own type descriptor (newer typer)
        name = str(param.bare_type())
    name = (name or "").lower()
    if "int" in name:
        return "INT"
    if "float" in name:
        return "FLOAT"
    if "path" in name or "file" in name:
        return "PATH"
    return "TEXT"
