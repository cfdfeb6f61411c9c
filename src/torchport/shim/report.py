"""The redirect report: what the shim changed, how often, and where it was first asked for.

One record per redirected API (``torch.Tensor.cuda``, ``torch.cuda.synchronize``,
``torch.distributed.init_process_group`` ...) with a count, the first call site in
user code and an example of the rewrite (``'cuda:0' -> npu:0``). Renderers turn the
same :class:`RedirectReport` into text (a rich table) or JSON.

Example::

    with torchport.shim.redirect_cuda() as shim:
        train()
    print(shim.report.to_text())
    shim.report.write_json("redirects.json")
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any

__all__ = ["RedirectRecord", "RedirectReport", "REPORT_SCHEMA"]

#: Version of the JSON layout written by :meth:`RedirectReport.to_dict`.
REPORT_SCHEMA = 1


@dataclasses.dataclass(kw_only=True)
class RedirectRecord:
    """One redirected API.

    Attributes:
        api: the public name the user's code called (``"torch.Tensor.cuda"``).
        count: how many calls were redirected.
        first_call_site: ``"file:line"`` in user code of the first redirected call
            (``"... (library)"`` when no user frame was on the stack).
        example: the first rewrite, e.g. ``"'cuda:0' -> npu:0"``.
    """

    api: str
    count: int = 0
    first_call_site: str = ""
    example: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (the JSON record)."""
        return dataclasses.asdict(self)


class RedirectReport:
    """Counts redirected calls per API; cheap to update on hot paths.

    Args:
        target: the selected device, as text (``"npu:0"``, ``"cpu"``).
        backend: the backend label (``"npu (emulated)"``).
        cpu_fallback: True when no accelerator was found and "cuda" means CPU.
    """

    def __init__(self, *, target: str, backend: str, cpu_fallback: bool) -> None:
        self.target = target
        self.backend = backend
        self.cpu_fallback = cpu_fallback
        self.records: dict[str, RedirectRecord] = {}
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def hit(self, api: str) -> RedirectRecord | None:
        """Count one call of ``api``; return its record when this was the first call (to fill in)."""
        rec = self.records.get(api)
        if rec is not None:
            rec.count += 1
            return None
        with self._lock:
            rec = self.records.get(api)
            if rec is not None:
                rec.count += 1
                return None
            rec = RedirectRecord(api=api, count=1)
            self.records[api] = rec
            return rec

    def note(self, text: str) -> None:
        """Add a one-off remark (a policy decision, e.g. DataParallel -> single device)."""
        if text not in self.notes:
            self.notes.append(text)

    def merge(self, other: dict[str, Any]) -> None:
        """Add another report's records (a :meth:`to_dict` document, e.g. a child process's) to this one."""
        with self._lock:
            for r in other.get("redirects", ()):
                rec = self.records.get(r["api"])
                if rec is None:
                    self.records[r["api"]] = RedirectRecord(api=r["api"], count=int(r["count"]),
                                                            first_call_site=r.get("first_call_site", ""),
                                                            example=r.get("example", ""))
                else:
                    rec.count += int(r["count"])
        for n in other.get("notes", ()):
            self.note(n)

    @property
    def total(self) -> int:
        """Number of redirected calls, all APIs together."""
        return sum(r.count for r in self.records.values())

    def sorted_records(self) -> list[RedirectRecord]:
        """Records, most-called first, then by name."""
        return sorted(self.records.values(), key=lambda r: (-r.count, r.api))

    # -- renderers -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON document: target, totals, one record per API, notes."""
        return {
            "schema": REPORT_SCHEMA,
            "tool": "torchport.shim",
            "target": self.target,
            "backend": self.backend,
            "cpu_fallback": self.cpu_fallback,
            "total_redirects": self.total,
            "redirects": [r.to_dict() for r in self.sorted_records()],
            "notes": list(self.notes),
        }

    def to_json(self, indent: int = 2) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_json` to ``path`` (atomically; parent directories are created)."""
        from torchport._json import write_text

        write_text(os.fspath(path), self.to_json() + "\n")

    def to_text(self) -> str:
        """Plain text table (what :meth:`print` shows without colour)."""
        lines = [self._headline()]
        rows = [(r.api, str(r.count), r.first_call_site, r.example) for r in self.sorted_records()]
        if rows:
            head = ("API", "calls", "first call site", "example")
            widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
            fmt = "  ".join("{:<%d}" % w for w in widths)
            lines.append(fmt.format(*head))
            lines.extend(fmt.format(*row) for row in rows)
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def print(self, file: Any = None) -> None:
        """Print the report to ``file`` (stderr by default): a rich table on a terminal, else plain text."""
        import sys

        from rich.console import Console
        from rich.table import Table

        out = file or sys.stderr
        if not (hasattr(out, "isatty") and out.isatty()):
            # Logs and CI: plain text, never truncated (call sites must stay greppable).
            print(self.to_text(), file=out)
            return
        console = Console(file=out, soft_wrap=True)
        console.print(f"[bold]{self._headline()}[/bold]")
        if self.records:
            table = Table(show_edge=False, pad_edge=False)
            for col in ("API", "calls", "first call site", "example"):
                table.add_column(col, justify="right" if col == "calls" else "left", overflow="fold")
            for r in self.sorted_records():
                table.add_row(r.api, str(r.count), r.first_call_site, r.example)
            console.print(table)
        for n in self.notes:
            console.print(f"note: {n}")

    def _headline(self) -> str:
        kind = self.target.split(":")[0]
        extra = self.backend[len(kind):].strip() if self.backend.startswith(kind) else f"({self.backend})"
        where = f"{self.target} {extra}".strip()
        fallback = " -- NO ACCELERATOR, ran on CPU" if self.cpu_fallback else ""
        return (f"torchport shim: CUDA calls redirected to {where}{fallback}: "
                f"{self.total} call(s) across {len(self.records)} API(s)")
