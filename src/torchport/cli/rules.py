"""`torchport rules` / `torchport explain`: the rule catalogue, on a terminal, in a pipe, as JSON or as pages.

In a pipe ``rules`` prints one plain line per rule (``CODE  name  severity  fix  default  summary``, no table
padding: a long summary does not widen every line); on a terminal a table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from torchport.cli._options import json_option, write_json

_JSON = json_option("the rule list")


def register(app: typer.Typer) -> None:
    """Attach ``rules`` and ``explain`` to the torchport app."""

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
            out = console(stderr=to_stdout)
            if out.is_terminal:
                table = Table(show_edge=False)
                for col in ("code", "name", "severity", "fix", "default", "what it finds"):
                    table.add_column(col, overflow="fold")
                for r in all_rules:
                    table.add_row(r.code, r.name, r.severity, r.fix, "on" if r.default_enabled else "off", r.summary)
                out.print(table)
            else:   # a pipe: one plain line per rule, no padding to the widest summary
                stream = sys.stderr if to_stdout else sys.stdout
                for r in all_rules:
                    stream.write(f"{r.code}  {r.name}  {r.severity}  fix:{r.fix}  "
                                 f"{'on' if r.default_enabled else 'off'}  {r.summary}\n")
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
            from torchport.cli._common import fail

            fail("explain", str(exc))
        console = Console()
        if console.is_terminal:
            console.print(Markdown(rule_page(rule)))
        else:
            sys.stdout.write(rule_page(rule))
