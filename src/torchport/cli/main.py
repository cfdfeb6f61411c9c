"""The ``torchport`` command: a typer app; each verb lives in its own module.

Verb modules expose ``register(app)``; :data:`VERBS` below is the explicit registry of verbs. Heavy imports
(torch, libcst) happen inside the verbs, so ``torchport --help`` is fast; ``torchport scan`` / ``fix`` /
``rules`` / ``explain`` build an app with their own module only (the other verbs' option help reads the
backend registry), which keeps a cached scan well under a third of a second.

The global options ``-q`` / ``-v`` work before the verb (``torchport -q scan``) and after it
(``torchport scan -q``): every verb gets them, except where it has an option of that name itself
(``check -v``: its evidence; ``bench -q``: its progress lines).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any, Sequence

import typer

from torchport.cli._common import guarded
from torchport.cli._options import MARKUP, normalise_help

#: verb -> the module under torchport.cli that registers it (the registry of verbs)
VERBS = {"doctor": "doctor", "scan": "scan", "fix": "scan", "rules": "rules", "explain": "rules", "run": "run",
         "train": "train", "data": "data", "profile": "profile", "bench": "bench", "check": "check",
         "launch": "launch"}
#: verbs whose module is enough on its own (no torch, no registry): main() builds a small app for them
_LIGHT = ("scan", "fix", "rules", "explain")

def _version(value: bool) -> None:
    if value:
        from torchport import __version__

        typer.echo(f"torchport {__version__}")
        raise typer.Exit(0)


def _global(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Show errors only (no warnings, no progress lines)."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More detail: -v info lines, -vv debug."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print torchport's version and exit."),
) -> None:
    """One PyTorch training codebase on CUDA, Ascend NPU, XPU, MPS and CPU.

    Global options go before the verb: torchport -q scan src
    """
    from torchport.log import setup_cli

    setup_cli(-1 if quiet else verbose)


_QUIET = inspect.Parameter("torchport_quiet", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
    False, "--quiet", "-q", help="Show errors only (also before the verb: torchport -q VERB)."))
_VERBOSE = inspect.Parameter("torchport_verbose", inspect.Parameter.KEYWORD_ONLY, annotation=int, default=typer.Option(
    0, "--verbose", "-v", count=True, help="More detail: -v info lines, -vv debug (also before the verb)."))


def _with_global_options(callback):
    """``callback`` with ``-q`` / ``-v`` added (those it does not define itself); given after the verb, they
    set the level as the same options before it do."""
    sig = inspect.signature(callback)
    own = {o for p in sig.parameters.values() for o in getattr(p.default, "param_decls", None) or ()}
    extra = [p for p, opts in ((_QUIET, {"-q", "--quiet"}), (_VERBOSE, {"-v", "--verbose"})) if not own & opts]
    if not extra:
        return callback

    @functools.wraps(callback)
    def verb(*args: Any, **kwargs: Any) -> Any:
        quiet, verbose = kwargs.pop("torchport_quiet", False), kwargs.pop("torchport_verbose", 0)
        if quiet or verbose:
            from torchport.log import setup_cli

            setup_cli(-1 if quiet else verbose)
        return callback(*args, **kwargs)

    verb.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
    return verb


def _guard_all(typer_app: typer.Typer, prefix: str = "") -> None:
    for info in typer_app.registered_commands:
        name = (prefix + " " + (info.name or info.callback.__name__)).strip()
        if not getattr(info.callback, "torchport_guard", None):
            info.callback = guarded(name, _with_global_options(info.callback))
    for group in typer_app.registered_groups:
        _guard_all(group.typer_instance, (prefix + " " + (group.name or "")).strip())
        if group.typer_instance.registered_callback is not None:
            cb = group.typer_instance.registered_callback
            if not getattr(cb.callback, "torchport_guard", None):
                cb.callback = guarded((prefix + " " + (group.name or "")).strip(), cb.callback)


def build_app(modules: Sequence[str] | None = None) -> typer.Typer:
    """The torchport app with the verbs of ``modules`` (default: every verb), each guarded (one error
    vocabulary, whatever its module does itself) and given the global options."""
    new = typer.Typer(name="torchport", help="One PyTorch training codebase on CUDA, Ascend NPU, XPU, MPS and CPU.",
                      no_args_is_help=True, add_completion=True, pretty_exceptions_show_locals=False,
                      rich_markup_mode=MARKUP)
    new.callback()(_global)
    for mod in dict.fromkeys(modules or VERBS.values()):
        importlib.import_module(f"torchport.cli.{mod}").register(new)
    _guard_all(new)
    return new


@functools.lru_cache(maxsize=1)
def _full_app() -> typer.Typer:
    return build_app()


def __getattr__(name: str) -> Any:
    if name == "app":       # the whole app, built on first use (tests and completion import it)
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command(modules: Sequence[str] | None = None):
    """The click command behind the app, with help rendering made independent of the typer version and plain
    option values converted without pydantic (:mod:`torchport.cli._coerce`)."""
    from torchport.cli._coerce import plain_values

    return plain_values(normalise_help(typer.main.get_command(build_app(modules) if modules else _full_app())))


def _verb(argv: Sequence[str]) -> str | None:
    """The verb in ``argv`` (the first word that is not a global option), or None."""
    for arg in argv:
        if arg in ("-q", "--quiet") or arg.startswith("-v") or arg == "--verbose":
            continue
        return None if arg.startswith("-") else arg
    return None


def main() -> None:
    """Console-script entry point."""
    verb = _verb(sys.argv[1:])
    command([VERBS[verb]] if verb in _LIGHT else None)(prog_name="torchport")


if __name__ == "__main__":
    main()
