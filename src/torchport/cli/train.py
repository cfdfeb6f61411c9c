"""`torchport train` (placeholder until its package lands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this verb to the torchport app."""

    @app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def _placeholder() -> None:
        """Not available yet."""
        typer.echo("torchport train: not available in this build yet", err=True)
        raise typer.Exit(2)
