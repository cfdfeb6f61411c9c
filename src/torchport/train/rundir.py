"""Choosing the run directory and the checkpoint to resume from (decided on rank 0, shared with all ranks).

* ``run_dir`` given: use it. Without ``--resume`` it must not already hold checkpoints
  (continuing by accident would mix two runs' metrics).
* no ``run_dir``, ``resume="auto"``: the newest run under ``runs_root`` that has a checkpoint
  (a fresh timestamped one when there is none).
* no ``run_dir``, ``resume=<path>``: the run that checkpoint belongs to.
* otherwise a fresh ``<runs_root>/<YYYYmmdd-HHMMSS>``.

Checkpoints go to ``<run_dir>/checkpoints`` unless ``checkpoint_dir`` names another directory or an
``s3://`` / ``obs://`` URL (:func:`checkpoint_dir_for`); ``--resume auto`` then looks there (in a
store: the ``latest.json`` pointer). Logs and metrics always stay in the local run directory
(``--run-dir s3://...`` is refused in one line: :mod:`torchport.paths`).

One writer per run: the run directory (and a checkpoint directory or store prefix outside it) is
locked before anything is written (:mod:`torchport.train.lock`); a second trainer refuses (exit 9).

Example::

    run_dir, resume_path = prepare_run_dir(cfg, main=True)
"""

from __future__ import annotations

import time
from pathlib import Path

from torchport.errors import ExitCode, TorchportError, on_every_rank
from torchport.errors import ConfigError
from torchport.storage import fs
from torchport.train.strategy import manager_for

__all__ = ["prepare_run_dir", "checkpoint_dir_for", "RunDirError"]


class RunDirError(TorchportError, OSError):
    """The run directory cannot be created or written (the message names it and the OS reason)."""

    exit_code = ExitCode.IO


def _create(run_dir: Path, config_name: str, text: str) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        from torchport.redact import redact

        (run_dir / config_name).write_text(redact(text))   # credentials in an endpoint URL stay in the process
    except OSError as exc:
        raise _unwritable(run_dir, exc) from None


def _unwritable(run_dir: Path, exc: OSError) -> RunDirError:
    return RunDirError(f"cannot write the run directory {str(run_dir)!r}: {exc.strerror or exc}; "
                       "pass --run-dir (or --runs-root) to a writable directory")


def _newest_run_with_checkpoint(cfg, root: Path) -> Path | None:
    def has_one(run: Path) -> bool:
        return run.is_dir() and manager_for(cfg, run / "checkpoints").latest(trust=cfg.trust_checkpoint) is not None

    runs = [p for p in root.iterdir() if has_one(p)] if root.is_dir() else []
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def _fresh(root: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = root / stamp, 1
    while path.exists():
        n += 1
        path = root / f"{stamp}-{n}"
    return path


def _lock(run_dir: Path, ckpt_dir) -> None:
    """Take the one-writer lock (:mod:`torchport.train.lock`) on the run dir and an outside checkpoint dir."""
    from torchport.train import lock

    outside = not Path(fs.key(ckpt_dir)).is_relative_to(fs.key(run_dir))    # a store URL is never inside
    try:
        lock.acquire(run_dir, ckpt_dir if outside else None)
    except OSError as exc:
        raise _unwritable(run_dir, exc) from None


def checkpoint_dir_for(cfg, run_dir: Path):
    """Where this run's checkpoints live: ``checkpoint_dir``; else the store prefix of a ``--resume URL``;
    else ``<run_dir>/checkpoints``."""
    if cfg.checkpoint_dir:
        return fs.location(cfg.checkpoint_dir)
    if cfg.resume and fs.remote(cfg.resume):
        return fs.parent(cfg.resume)
    return Path(run_dir) / "checkpoints"


def _refuse_broad(path, option: str) -> None:
    """``run_dir: /`` or ``checkpoint_dir: ~`` would let the trainer's cleanup and checkpoint pruning loose on a
    whole filesystem / home folder: refused (ConfigError, exit 2), naming the option and the fix."""
    if path is None or fs.remote(path):
        return
    real = Path(path).expanduser().resolve()
    broad = {Path("/").resolve(), Path.home().resolve()}
    if real in broad:
        raise ConfigError(f"{option} {path}: refusing to use {real} (the filesystem root or your home folder) as a "
                          f"run's own folder; name a dedicated sub-folder, e.g. {option} {real / 'runs' / 'a'}")


def _decide(cfg) -> tuple[Path, Path | str | None]:
    _refuse_broad(cfg.run_dir, "--run-dir")
    _refuse_broad(cfg.checkpoint_dir, "--checkpoint-dir")
    root = Path(cfg.runs_root)
    if cfg.run_dir:
        run_dir = Path(cfg.run_dir)
    elif cfg.checkpoint_dir or (cfg.resume and fs.remote(cfg.resume)):
        run_dir = _fresh(root)  # the checkpoints are found through checkpoint_dir / the URL, not the run dir
    elif cfg.resume == "auto":
        run_dir = _newest_run_with_checkpoint(cfg, root) or _fresh(root)
    elif cfg.resume:
        p = Path(cfg.resume)
        run_dir = p.parent.parent if p.parent.name == "checkpoints" else _fresh(root)
    else:
        run_dir = _fresh(root)
    directory = checkpoint_dir_for(cfg, run_dir)
    fs.check_reachable(directory)   # a missing bucket / denied / unreachable store: now, not after the first epoch
    _lock(run_dir, directory)    # one writer per run: a second trainer stops here, before it writes anything
    manager = manager_for(cfg, directory)
    where = f"checkpoint dir {cfg.checkpoint_dir}" if cfg.checkpoint_dir else f"run dir {run_dir}"
    if cfg.resume is None and manager.checkpoints():
        raise ConfigError(f"{where} already has checkpoints; pass --resume auto to continue that run, "
                          "or choose another --run-dir / --checkpoint-dir")
    other = "fsdp" if cfg.strategy == "ddp" else "ddp"
    if cfg.resume == "auto" and not manager.checkpoints() and manager_for(cfg.replace(strategy=other), directory).checkpoints():
        raise ConfigError(f"{where} holds --strategy {other} checkpoints, and this run is --strategy {cfg.strategy}: "
                          f"pass --strategy {other}, or convert the latest one with `python -m torchport.train.convert "
                          "SRC DST` and --resume DST")
    resume = manager.resolve(cfg.resume, trust=cfg.trust_checkpoint)
    if cfg.resume == "auto" and resume is None and manager.checkpoints():
        # every checkpoint here was skipped (refused or damaged; the warning names each): starting afresh in this
        # directory would overwrite them step by step, so stop instead
        from torchport.runtime.checkpoint import CheckpointError

        raise CheckpointError(f"{where} holds checkpoints, but none verifies (the warning above names why); pass "
                              "--trust-checkpoint if you made them yourself, or choose another --run-dir / "
                              "--checkpoint-dir to start afresh")
    return run_dir, resume


def prepare_run_dir(cfg, *, main: bool, device=None) -> tuple[Path, Path | None]:
    """Decide (rank 0) and share (all ranks) the run directory and the resume checkpoint.

    Rank 0 also creates the directory and writes ``config.yaml``. ``device`` is where the
    collective stages the pickled decision (HCCL/NCCL only move device tensors).

    Raises:
        ConfigError: ``run_dir`` holds checkpoints but no ``--resume`` was given.
        CheckpointError: an explicit ``--resume PATH`` does not exist.
        RunDirError: the run directory cannot be created or written (exit code IO).
    """
    import torch.distributed as tdist

    decision: list = [None]
    error: Exception | None = None
    if main:
        try:
            decision[0] = _decide(cfg)
            run_dir, resume_path = decision[0]
            _create(run_dir, "config.resumed.yaml" if resume_path else "config.yaml", cfg.to_yaml())
        except Exception as exc:  # shared so every rank stops with the same message
            error = exc
            decision[0] = exc
    shared = tdist.is_available() and tdist.is_initialized()
    if shared:
        tdist.broadcast_object_list(decision, src=0, device=device)
    if error is not None:
        raise on_every_rank(error) if shared else error     # every rank raises it: one line for the run
    if isinstance(decision[0], Exception):
        raise on_every_rank(decision[0])
    run_dir, resume_path = decision[0]
    if resume_path:
        resume_path = fs.location(resume_path)
    return Path(run_dir), (resume_path or None)
