"""Where numbers go: JSONL (everything), CSV (one file per record kind), TensorBoard when installed,
and what the user watches (a rich progress bar on a terminal, plain lines in logs).

Only rank 0 writes; on other ranks every method is a no-op.

Example::

    log = MetricsLogger(run_dir, enabled=is_main_process())
    log.write("step", step=10, epoch=0, loss=2.1, lr=0.1)
    log.close()
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "ProgressDisplay", "topk_correct", "read_jsonl", "step_losses", "epoch_records", "write_curves",
           "summary_line"]

#: CSV columns per record kind (other kinds go to the JSONL only).
CSV_COLUMNS = {
    "step": ["step", "epoch", "loss", "lr", "images_per_s", "loss_scale", "time_s"],
    "epoch": ["epoch", "step", "train_loss", "val_loss", "val_top1", "val_top5", "lr", "images_per_s",
              "epoch_time_s", "bad_files", "time_s"],
}


def topk_correct(logits, labels, ks: tuple[int, ...] = (1, 5)) -> list[Any]:
    """Number of samples whose label is among the top-k logits, one 0-d tensor per ``k``
    (``k`` is capped at the number of classes). Stays on the device: no sync."""
    maxk = min(max(ks), logits.shape[1])
    top = logits.topk(maxk, dim=1).indices                  # [B, maxk]
    hit = top.eq(labels.view(-1, 1))                        # [B, maxk] bool
    return [hit[:, : min(k, maxk)].any(dim=1).sum() for k in ks]


def read_jsonl(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl`` (optionally only one ``kind``).

    A line that is not a JSON object -- the torn last record of a run killed mid-write -- is skipped
    with one warning naming the file and the line; the records around it are kept.
    """
    out, torn = [], []
    for no, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            torn.append(no)
            continue
        if kind is None or rec.get("kind") == kind:
            out.append(rec)
    if torn:
        import logging

        logging.getLogger("torchport.train").warning(
            "%s: skipped %d unreadable line(s) (line %s; a run killed mid-write leaves one)", path, len(torn),
            ", ".join(map(str, torn[:5])))
    return out


def step_losses(run_dir: str | Path) -> dict[int, float]:
    """``{step: loss}`` of a run directory's ``metrics.jsonl`` (a step run twice keeps its last value)."""
    return {r["step"]: r["loss"] for r in read_jsonl(Path(run_dir) / "metrics.jsonl", "step")}


def epoch_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's ``epoch`` records in epoch order; a re-run epoch (after a resume) keeps its last record."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    by_epoch = {int(r["epoch"]): r for r in read_jsonl(path, "epoch")}
    return [by_epoch[e] for e in sorted(by_epoch)]


def write_curves(run_dir: str | Path, records: list[dict[str, Any]] | None = None) -> Path | None:
    """Plot loss, accuracy, learning rate and img/s per epoch into ``<run_dir>/curves.png``.

    Before the first epoch ends (a run stopped by a signal in its first epoch) the step records are
    plotted per step instead. Returns the path, or None when there is no record at all. Uses
    matplotlib's Agg backend (no display needed); the file is written atomically.
    """
    import os

    records = epoch_records(run_dir) if records is None else records
    x_key = "epoch"
    if not records and (Path(run_dir) / "metrics.jsonl").is_file():
        by_step = {int(r["step"]): r for r in read_jsonl(Path(run_dir) / "metrics.jsonl", "step")}
        records, x_key = [by_step[k] for k in sorted(by_step)], "step"
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    num = lambda r, k: r.get(k) if isinstance(r.get(k), (int, float)) else float("nan")  # noqa: E731
    x = [int(r[x_key]) + (1 if x_key == "epoch" else 0) for r in records]
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    panels = [("loss", [("train_loss", "train"), ("loss", "train"), ("val_loss", "val")]),
              ("val accuracy", [("val_top1", "top-1"), ("val_top5", "top-5")]),
              ("learning rate", [("lr", "lr")]), ("images/s", [("images_per_s", "train")])]
    for ax, (title, series) in zip(axes, panels):
        for key, label in series:
            ys = [num(r, key) for r in records]
            if any(math.isfinite(y) for y in ys):
                ax.plot(x, ys, marker="o", label=label)
        ax.set_title(title)
        ax.set_xlabel(x_key)
        ax.grid(alpha=0.3)
        if len(ax.get_legend_handles_labels()[0]) > 1:
            ax.legend()
    fig.tight_layout()
    out = Path(run_dir) / "curves.png"
    tmp = out.with_name(".curves.png.tmp")
    fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    os.replace(tmp, out)
    return out


def summary_line(result: Any, best_top1: float | None) -> str:
    """The one line a run ends with: last and best val top-1, the run dir and the last checkpoint."""
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    if getattr(result, "stopped", None):   # not "done": a signal ended the run early
        return (f"stopped by {result.stopped} at step {result.steps}: val top-1 {pct(result.val_top1)} "
                f"(best {pct(best_top1)}), run dir {result.run_dir}, last checkpoint {result.last_checkpoint or '-'}")
    return (f"done: val top-1 {pct(result.val_top1)} (best {pct(best_top1)}), run dir {result.run_dir}, "
            f"last checkpoint {result.last_checkpoint or '-'}")


class MetricsLogger:
    """Append-only metrics sink for one run directory (appends on resume, never truncates).

    Files: ``metrics.jsonl`` (every record, with ``kind``), ``steps.csv``, ``epochs.csv`` and
    ``tb/`` (TensorBoard; when ``tensorboard`` is True, or None and the package is installed).
    """

    def __init__(self, run_dir: str | Path, *, enabled: bool = True, tensorboard: bool | None = None) -> None:
        self.enabled = enabled
        self.run_dir = Path(run_dir)
        self.t0 = time.time()
        self.tb = None
        self.tb_note = ""
        if not enabled:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = self._guarded(lambda: _open_append(self.run_dir / "metrics.jsonl"), "metrics.jsonl")
        self._csv: dict[str, tuple[Any, Any]] = {}
        if tensorboard is not False:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.run_dir / "tb"))
            except Exception as exc:  # ImportError: tensorboard not installed
                self.tb_note = f"TensorBoard off ({type(exc).__name__}: pip install tensorboard to enable)"
                if tensorboard:
                    raise

    def _guarded(self, fn, name: str):
        """``fn()``, with an OS error (disk full, read-only) turned into one WriteError naming the file."""
        from torchport.errors import WriteError

        try:
            return fn()
        except OSError as exc:
            raise WriteError(f"cannot write {self.run_dir / name}: {exc.strerror or exc}; free space or pass "
                             "--run-dir on another file system (checkpoints written so far are kept)") from None

    def write(self, kind: str, **values: Any) -> None:
        """Record one row: JSONL always, CSV for known kinds, TensorBoard scalars for numbers.

        Raises:
            WriteError: the disk is full or the run directory turned read-only (names the file).
        """
        if not self.enabled:
            return
        self._guarded(lambda: self._write(kind, values), "metrics.jsonl" if kind not in CSV_COLUMNS else f"{kind}s.csv")

    def _write(self, kind: str, values: dict[str, Any]) -> None:
        values.setdefault("time_s", round(time.time() - self.t0, 3))
        from torchport.redact import redact_obj

        # secrets never leave the process: an endpoint with credentials in the config, a presigned data URL ...
        rec = redact_obj({"kind": kind, **{k: _plain(v) for k, v in values.items()}})
        self._jsonl.write(json.dumps(rec) + "\n")
        cols = CSV_COLUMNS.get(kind)
        if cols:
            if kind not in self._csv:
                path = self.run_dir / f"{kind}s.csv"
                new = not path.exists() or path.stat().st_size == 0
                fh = open(path, "a", newline="", buffering=1)
                writer = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
                if new:
                    writer.writeheader()
                self._csv[kind] = (fh, writer)
            self._csv[kind][1].writerow({c: rec.get(c) for c in cols})
        if self.tb is not None and "step" in values:
            for k, v in rec.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("step", "epoch", "time_s"):
                    self.tb.add_scalar(f"{kind}/{k}", v, int(values["step"]))

    def close(self) -> None:
        """Flush and close every file."""
        if not self.enabled:
            return
        self._jsonl.close()
        for fh, _ in self._csv.values():
            fh.close()
        self._csv.clear()
        if self.tb is not None:
            self.tb.close()


def _open_append(path: Path):
    """Open a JSONL file for appending, first ending a torn last line (a run killed mid-write) so the
    next record starts on a line of its own instead of being glued to the fragment."""
    fh = open(path, "a+b", buffering=0)
    if fh.tell() > 0:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":
            fh.write(b"\n")
    fh.close()
    return open(path, "a", buffering=1)


def _plain(v: Any) -> Any:
    """JSON-safe value: floats stay exact (repr round-trips), NaN/inf become strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


class ProgressDisplay:
    """Per-epoch progress: a rich bar (loss, img/s, ETA) on a terminal, plain lines otherwise.

    Args:
        mode: ``auto`` (bar when stdout is a terminal), ``bar``, ``plain`` or ``none``.
        enabled: False on non-zero ranks.
    """

    def __init__(self, mode: str = "auto", *, enabled: bool = True) -> None:
        from rich.console import Console

        self.console = Console(stderr=False)
        if not enabled or mode == "none":
            self.mode = "none"
        elif mode == "auto":
            self.mode = "bar" if self.console.is_terminal else "plain"
        else:
            self.mode = mode
        self._progress = None
        self._task = None

    def print(self, msg: str) -> None:
        """A line for the user (above the bar while one is live)."""
        if self.mode == "none":
            return
        if self._progress is not None:
            self._progress.console.print(msg, soft_wrap=True)
        else:
            self.console.print(msg, highlight=False, soft_wrap=True)
            sys.stdout.flush()

    def start_epoch(self, epoch: int, epochs: int, total_steps: int, done: int = 0) -> None:
        """Begin an epoch of ``total_steps`` optimizer steps (``done`` already done, on resume)."""
        self._epoch_label = f"epoch {epoch + 1}/{epochs}"
        if self.mode != "bar":
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[ips]} img/s"),
            TextColumn("ETA"), TimeRemainingColumn(), console=self.console, transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(self._epoch_label, total=total_steps, completed=done, loss="-", ips="-")

    def tick(self, step_in_epoch: int) -> None:
        """Move the bar after every step (cheap: no device sync, rich rate-limits the redraw)."""
        if self._progress is not None:
            self._progress.update(self._task, completed=step_in_epoch)

    def update(self, step_in_epoch: int, total: int, *, loss: float | None, ips: float, eta_s: float) -> None:
        """Advance to ``step_in_epoch``; plain mode prints one line."""
        if self.mode == "bar" and self._progress is not None:
            self._progress.update(self._task, completed=step_in_epoch,
                                  loss=f"{loss:.4f}" if loss is not None else "-", ips=f"{ips:,.0f}")
        elif self.mode == "plain":
            loss_s = f"{loss:.4f}" if loss is not None else "-"
            print(f"{self._epoch_label} step {step_in_epoch}/{total}  loss {loss_s}  {ips:,.0f} img/s  "
                  f"ETA {_fmt_eta(eta_s)}", flush=True)

    def end_epoch(self) -> None:
        """Close the bar (the epoch summary line follows)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    seconds = int(max(0, seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
