"""flake8 plugin (entry point ``flake8.extension``: ``TPT``) running the default torchport rules.

flake8 only reports codes that start with a registered plugin prefix, so rule ``TP101``
is reported as ``TPT101`` (the message ends with the rule's own code and name)::

    $ flake8 --select TPT train.py
    train.py:12:9: TPT101 `.cuda()` only targets CUDA devices; use `.to(torchport.device())` [TP101 cuda-method]

Fixes are not applied from flake8; run ``torchport fix`` for that.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from torchport import __version__

__all__ = ["TorchportFlake8", "flake8_code"]


def flake8_code(code: str) -> str:
    """``TP101`` -> ``TPT101`` (the prefix flake8 routes to this plugin)."""
    return "TPT" + code[2:]


class TorchportFlake8:
    """A flake8 "tree" plugin; it re-parses the file's lines with LibCST (formatting matters)."""

    name = "torchport"
    version = __version__

    def __init__(self, tree: Any, filename: str = "<stdin>", lines: Sequence[str] | None = None) -> None:
        self.filename = filename
        self.lines = lines

    def _source(self) -> str:
        if self.lines is not None:
            return "".join(self.lines)
        with open(self.filename, encoding="utf-8") as fh:
            return fh.read()

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        """Yield ``(line, column, "TPTnnn message", type)`` per finding (column 0-based)."""
        from torchport.migrate import catalog
        from torchport.migrate.engine import analyze

        result = analyze(self._source(), self.filename, catalog.ruleset())
        for f in result.findings:
            yield f.line, f.column - 1, f"{flake8_code(f.code)} {f.message} [{f.code} {f.name}]", type(self)
