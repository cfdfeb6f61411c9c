"""The ``torchport`` command: a typer app; each verb lives in its own module.

Verb modules expose ``register(app)``; the list below is the explicit registry of verbs.
Heavy imports (torch, libcst) happen inside the verbs, so ``torchport --help`` is fast.
"""

from __future__ import annotations

import typer

from torchport.cli import bench, check, data, doctor, profile, run, scan, train
from torchport.cli._common import guarded
from torchport.cli._options import MARKUP, normalise_help

app = typer.Typer(
    name="torchport",
    help="One PyTorch training codebase on CUDA, Ascend NPU, XPU, MPS and CPU.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=MARKUP,
)

def _version(value: bool) -> None:
    if value:
        from torchport import __version__

        typer.echo(f"torchport {__version__}")
        raise typer.Exit(0)


@app.callback()
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


for _verb in (doctor, scan, run, train, data, profile, bench, check):
    _verb.register(app)


def _guard_all(typer_app: typer.Typer, prefix: str = "") -> None:
    for info in typer_app.registered_commands:
        name = (prefix + " " + (info.name or info.callback.__name__)).strip()
        if not getattr(info.callback, "torchport_guard", None):
            info.callback = guarded(name, info.callback)
    for group in typer_app.registered_groups:
        _guard_all(group.typer_instance, (prefix + " " + (group.name or "")).strip())
        if group.typer_instance.registered_callback is not None:
            cb = group.typer_instance.registered_callback
            if not getattr(cb.callback, "torchport_guard", None):
                cb.callback = guarded((prefix + " " + (group.name or "")).strip(), cb.callback)


# Every verb (and sub-verb) speaks the one error vocabulary, whatever its module does itself.
_guard_all(app)
def command():
    """The click command behind the app, with help rendering made independent of the typer version."""
    return normalise_help(typer.main.get_command(app))


def main() -> None:
    """Console-script entry point."""
    command()(prog_name="torchport")


if __name__ == "__main__":
    main()
