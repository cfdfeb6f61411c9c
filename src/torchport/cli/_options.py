"""The one CLI vocabulary: option factories every verb uses, deprecated aliases, and help rendering.

Every verb spells the same idea the same way (see the table in the README):

* ``--batch-size``, ``--image-size``, ``--num-classes``;
* ``--device auto|<backend>[:i]`` -- the backend list in its help comes from the registry, default
  ``auto`` (= ``TORCHPORT_DEVICE`` when set, else the first available backend);
* ``--precision fp32|fp16|bf16|auto|amp`` -- validated by :func:`parse_precision` (one parser);
* ``--json FILE`` with ``-`` meaning stdout (:func:`write_json`);
* ``--require-accelerator``.

A renamed flag keeps its old spelling as a hidden option; :func:`renamed` merges the two and prints
one deprecation line. :func:`normalise_help` makes ``--help`` look the same whatever typer version
is installed (plain text, no rich markup, explicit metavars, none on boolean flags).
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from torchport._json import write_json
from torchport.cli._common import fail

__all__ = [
    "PRECISIONS", "device_help", "device_option", "device_arg", "precision_option", "parse_precision",
    "json_option", "write_json", "require_accelerator_option", "alias", "renamed", "warn_deprecated",
    "normalise_help", "MARKUP", "preset_arg",
]

#: typer's ``rich_markup_mode`` for every app: plain text, so ``[a|b]`` in a help string is printed as is.
MARKUP = None


def _precisions() -> tuple[str, ...]:
    from torchport.backends.spec import PRECISIONS

    return PRECISIONS


PRECISIONS = _precisions()


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
    values = "|".join(PRECISIONS)
    text = (help + " " if help else "") + (f"Comma-separated list of {values}" if many else values)
    text += "; amp = the backend's low precision (bf16 or fp16), auto = that where it is fast, else fp32."
    return typer.Option(default, "--precision", metavar="PRECISION", help=text)


def parse_precision(verb: str, value: Optional[str], *, many: bool = False) -> Any:
    """Validate ``--precision`` (lower-cased); a usage error names the allowed values."""
    if value is None:
        return None
    items = [v.strip().lower() for v in value.split(",")] if many else [value.strip().lower()]
    bad = [v for v in items if v not in PRECISIONS]
    if bad or not items:
        fail(verb, f"--precision {value!r}: {bad[0] if bad else value!r} is not one of {' | '.join(PRECISIONS)}"
                   + (" (a comma-separated list, baseline first)" if many else ""))
    return tuple(items) if many else items[0]


def json_option(what: str = "the report") -> Any:
    """``--json FILE`` (``-`` = stdout)."""
    return typer.Option(None, "--json", metavar="FILE", help=f"Write {what} as JSON to FILE ('-' for stdout).")


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
