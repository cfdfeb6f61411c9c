"""Jupyter notebooks, scanned and fixed like ruff does: the code cells only, as one Python text.

:class:`Notebook` turns a ``.ipynb`` file into one Python source -- every code cell in order, each followed by a
boundary line -- and back:

* IPython syntax is left alone: a line magic or shell line (``%matplotlib inline``, ``!pip install x``,
  ``files = !ls``, help syntax ``obj?`` / ``torch.*Tensor?``) becomes ``pass`` at the same indentation while scanning and is put back verbatim;
  a cell whose first line is a cell magic (``%%bash``, ``%%writefile``) is not Python and is skipped whole,
  except ``%%time`` / ``%%timeit`` / ``%%capture``, whose body is Python;
* positions are cell-relative: ``nb.ipynb:cell 3:line 2:col 5`` (cells counted from 1 over every cell, markdown
  included, as the notebook shows them);
* a fix rewrites only the ``source`` of the code cells it changes; outputs, metadata and execution counts are
  untouched, and the JSON is written back in the notebook's own layout (indentation, key order, escaping, final
  newline -- found by re-serialising the unchanged notebook until it reproduces the file byte for byte; a
  notebook whose layout cannot be reproduced is reported and not rewritten).

Example::

    nb = Notebook.load(open("train.ipynb").read())
    nb.cell_position(5)          # (3, 2): line 5 of the Python text is cell 3, line 2
    new_json = nb.rebuild(fixed_python_text)
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["Notebook", "NotebookError", "BOUNDARY"]

#: the line after each cell in the Python text (a statement, so that no fix can move it into a cell's comments)
BOUNDARY = "...  # torchport: cell boundary"
_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)pass  # torchport: ipython (?P<n>\d+)$")
#: a line IPython transforms: a line magic or shell escape (``%time f()``, ``!ls``, ``files = !ls``), or help
#: syntax -- ``obj?``, ``obj.attr??``, ``?obj``, ``obj[0]?`` and the wildcard search ``torch.*Tensor?``
_NAME = r"%{0,2}[\w*]+(?:\.[\w*]+|\[-?\d+\])*"
_MAGIC = re.compile(rf"^[ \t]*(?:[%!]|[\w.]+[ \t]*=[ \t]*[%!])|^[ \t]*(?:{_NAME}\?{{1,2}}|\?{{1,2}}{_NAME})[ \t]*$")
_PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture")


class NotebookError(ValueError):
    """The file is not a notebook this module can read (or write back without changing its layout)."""


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


class Notebook:
    """One notebook's code cells as Python text, with the way back."""

    def __init__(self, text: str, data: dict) -> None:
        self.text, self.data = text, data
        self.cells: list[dict] = data["cells"]
        self.ipython: list[str] = []              # original IPython lines, by placeholder number
        self.segments: list[tuple[int, int, bool]] = []   # (cell index, first virtual line, newline added)
        parts: list[str] = []
        line = 1
        for index, cell in enumerate(self.cells):
            if cell.get("cell_type") != "code":
                continue
            src = _source(cell)
            first = src.split("\n", 1)[0].strip()
            if first.startswith("%%") and first.split()[0] not in _PYTHON_CELL_MAGICS:
                continue        # %%bash, %%writefile ...: not Python
            body = "".join(self._python_line(ln) for ln in src.splitlines(keepends=True))
            added = bool(body) and not body.endswith("\n")
            body += "\n" if added else ""
            self.segments.append((index, line, added))
            parts.append(body + BOUNDARY + "\n")
            line += body.count("\n") + 1
        self.virtual = "".join(parts)

    def _python_line(self, line: str) -> str:
        bare = line.rstrip("\r\n")
        if not _MAGIC.match(bare):
            return line
        indent = bare[:len(bare) - len(bare.lstrip(" \t"))]
        self.ipython.append(bare)
        return f"{indent}pass  # torchport: ipython {len(self.ipython) - 1}" + line[len(bare):]

    @classmethod
    def load(cls, text: str) -> "Notebook":
        """Read a notebook's JSON text.

        Raises:
            NotebookError: not JSON, or no ``cells`` list (one line saying which).
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise NotebookError(f"not a notebook: invalid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise NotebookError("not a notebook: no \"cells\" list (nbformat 4 is read)")
        return cls(text, data)

    @property
    def lines(self) -> int:
        """Lines of Python in the scanned code cells."""
        return sum(_source(self.cells[i]).count("\n") + (0 if _source(self.cells[i]).endswith("\n") else 1)
                   for i, _, _ in self.segments if _source(self.cells[i]))

    def cell_position(self, line: int) -> tuple[int, int]:
        """Line ``line`` of :attr:`virtual` as (cell number counted from 1, line in that cell)."""
        cell, start = self.segments[0][0], 1
        for index, first, _ in self.segments:
            if first > line:
                break
            cell, start = index, first
        return cell + 1, line - start + 1

    def rebuild(self, virtual: str) -> str:
        """The notebook's JSON text with the code cells of ``virtual`` (a rewritten :attr:`virtual`).

        Raises:
            NotebookError: the cell boundaries did not survive, or the file's JSON layout cannot be reproduced.
        """
        pieces = virtual.split(BOUNDARY + "\n")
        if len(pieces) != len(self.segments) + 1 or pieces[-1].strip():
            raise NotebookError("the rewrite moved a cell boundary; notebook left unchanged")
        data = json.loads(self.text)
        for (index, _, added), body in zip(self.segments, pieces):
            body = "".join(self._restore(ln) for ln in body.splitlines(keepends=True))
            if added and body.endswith("\n"):
                body = body[:-1]
            cell = data["cells"][index]
            if body == _source(cell):
                continue
            cell["source"] = body.splitlines(keepends=True) if isinstance(cell.get("source"), list) else body
        return _dumps_like(self.text, self.data, data)

    def _restore(self, line: str) -> str:
        bare = line.rstrip("\r\n")
        m = _PLACEHOLDER.match(bare)
        if m is None:
            return line
        return self.ipython[int(m.group("n"))] + line[len(bare):]


def _dumps_like(original: str, parsed: Any, new: Any) -> str:
    """``new`` serialised the way ``original`` (whose value is ``parsed``) was."""
    tail = original[len(original.rstrip("\r\n")):]
    for indent in (1, 2, 4, "\t", 3, None):
        for sort_keys in (True, False):
            for ensure_ascii in (False, True):
                kwargs = {"indent": indent, "sort_keys": sort_keys, "ensure_ascii": ensure_ascii}
                if json.dumps(parsed, **kwargs) + tail == original:
                    return json.dumps(new, **kwargs) + tail
    raise NotebookError("its JSON layout (indentation, key order, escaping) is not one torchport can reproduce; "
                        "notebook left unchanged -- save it once from Jupyter, then fix again")
