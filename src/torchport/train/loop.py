"""The reference training loop: image classification on any backend, readable top to bottom.

Nothing here names a device type. The device, the collective backend, AMP numerics and the
DataLoader policy come from :mod:`torchport.runtime`; the same file runs on CPU, a GPU, an Ascend
NPU (real or emulated) and under ``torchrun`` on many of them.

Example::

    from torchport.train import TrainConfig, train
    result = train(TrainConfig(epochs=1, model="resnet18"))
    print(result.val_top1)
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from typing import Any, Callable, Sequence

from torchport.errors import ConfigError
from torchport.train.config import TrainConfig

from torchport.train.errors import NonFiniteLossError

__all__ = ["train", "TrainResult", "NonFiniteLossError"]


@dataclasses.dataclass
class TrainResult:
    """What a run produced (also written to ``<run_dir>/summary.json``)."""

    run_dir: str
    device: str
    precision: str
    world_size: int
    epochs_completed: int
    steps: int
    train_loss: float | None
    val_loss: float | None
    val_top1: float | None
    val_top5: float | None
    images_per_s: float
    wall_s: float
    bad_files: int
    resumed_from: str | None
    last_checkpoint: str | None
    best_val_top1: float | None = None    # over every epoch of the run dir (resumed runs included)
    stopped: str | None = None            # "SIGTERM" / "SIGINT" when a signal stopped the run early
    compile_s: float | None = None        # --compile: the first step's seconds (compile), warm-up: not in images/s


def train(cfg: TrainConfig, *, callbacks: Sequence[Callable[..., None]] = ()) -> TrainResult:
    """Train ``cfg.model`` on ``cfg.data`` (or the embedded dataset) and evaluate every epoch.

    Args:
        cfg: the run's :class:`~torchport.train.config.TrainConfig`.
        callbacks: called as ``cb(step=, epoch=, rank=)`` after every optimizer step (tests inject faults
            and delays this way, from outside the loop).

    Returns:
        A :class:`TrainResult` (rank 0 also writes it to ``summary.json``).

    Raises:
        ConfigError, DataError, NonFiniteLossError, CheckpointError -- each names the fix.
        RunLockedError: another trainer writes to the same run dir / checkpoint dir.
        Interrupted, Terminated: SIGINT / SIGTERM stopped the run after its checkpoint and summary
            (the message is the resume command).
    """
    from torchport.train import lock
    from torchport.train.stop import stop_requests

    # SIGTERM/SIGINT set a flag checked once per step (installed before any DataLoader worker is forked,
    # so workers inherit a handler that ignores them); the run dir's one-writer lock is taken in
    # prepare_run_dir and released here, however the run ends.
    with stop_requests() as stop:
        try:
            return _train(cfg, stop, callbacks)
        finally:
            lock.release_all()


def _train(cfg: TrainConfig, stop, callbacks: Sequence[Callable[..., None]]) -> TrainResult:
    import torch

    from torchport.runtime import distributed as dist
    from torchport.runtime.amp import Amp
    from torchport.runtime.seed import seed_everything
    from torchport.train.inputs import build_inputs
    from torchport.train.metrics import MetricsLogger, ProgressDisplay
    from torchport.train.models import check_model_name
    from torchport.train.rundir import checkpoint_dir_for, prepare_run_dir
    from torchport.runtime.step import compile_backend_name, compile_line, compile_model
    from torchport.train.stop import resume_command
    from torchport.train.strategy import strategy_for

    t_start = time.time()

    # A misspelt model name is reported before anything slow or data-dependent happens.
    check_model_name(cfg.model)

    # ---- 1. Where we run -------------------------------------------------------------------------
    # One process per device. Under torchrun this joins the process group (the collective backend is chosen
    # by the backend record) and picks the device from LOCAL_RANK; alone it just selects the device.
    if cfg.storage_endpoint:  # s3:// / obs:// endpoint for this process, its workers and checkpoints
        from torchport.storage.store import configure

        configure(endpoint=cfg.storage_endpoint)
    target = dist.init_distributed(cfg.device, require_accelerator=cfg.require_accelerator)
    rank, world = dist.rank(), dist.world_size()
    main = dist.is_main_process()
    # Same seed on every rank: identical initial weights (DDP also broadcasts rank 0's at wrap time).
    seed_everything(cfg.seed, deterministic=cfg.deterministic)

    run_dir, resume_path = prepare_run_dir(cfg, main=main, device=target.device)
    log = MetricsLogger(run_dir, enabled=main, tensorboard=cfg.tensorboard)
    ui = ProgressDisplay(cfg.progress, enabled=main)
    stop.announce, stop.resume = ui.print, resume_command(run_dir, resume_path)
    # ddp: a full replica per rank, rank 0 writes one file; fsdp: shards everywhere, every rank writes its own
    strategy = strategy_for(cfg)
    manager = strategy.manager(checkpoint_dir_for(cfg, run_dir), cfg.keep_last)  # dir or s3:// / obs://

    # ---- 2. Data -----------------------------------------------------------------------------------
    # Workers decode and augment into uint8 batches; the loader normalises them on the device (4x less
    # host->device traffic than floats) and yields float [B, 3, S, S] + int64 [B] already there.
    inputs = build_inputs(cfg, target, rank=rank, world_size=world)
    train_loader, val_loader = inputs.train_loader, inputs.val_loader
    num_classes = cfg.num_classes or len(inputs.classes)
    if num_classes < len(inputs.classes):
        raise ConfigError(f"num_classes={num_classes} but the data has {len(inputs.classes)} classes")
    steps_per_epoch = len(train_loader) // cfg.accum_steps
    total_steps = cfg.epochs * steps_per_epoch
    if cfg.max_steps is not None:
        total_steps = min(total_steps, cfg.max_steps)

    # ---- 3. Model, spread over the ranks, then optimizer, schedule, numerics --------------------------
    # fp32: no-op; fp16: autocast + GradScaler; bf16: autocast only (under fsdp also bf16 parameters for
    # compute). The optimizer is built after wrapping: under fsdp it must see the shards.
    # Weight decay skips norms and biases.
    amp = Amp(cfg.precision, target)
    model = _build_model(cfg, target, num_classes)
    wrapped = strategy.wrap(model, target, amp)          # ddp: DistributedDataParallel; fsdp: sharded in place
    optimizer, scheduler = _build_optimizer(cfg, model, steps_per_epoch, total_steps)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing)

    # ---- 4. Resume ----------------------------------------------------------------------------------
    # The checkpoint is read onto CPU and copied into the device-resident model and optimizer, so a
    # checkpoint from another device type resumes here (fsdp: from any world size, DCP reshards).
    progress: dict[str, Any] = {}
    if resume_path is not None:
        progress = strategy.load(manager, resume_path, model=model, optimizer=optimizer, amp=amp, scheduler=scheduler,
                                 trust=cfg.trust_checkpoint)
    step = int(progress.get("step", 0))                      # optimizer steps done, all epochs
    start_epoch = int(progress.get("epoch", 0)) + (1 if progress.get("epoch_done") else 0)
    resume_loader = None if progress.get("epoch_done") else progress.get("loader")   # mid-epoch position

    # ---- 5. Optionally compile ------------------------------------------------------------------------
    train_model = wrapped
    if cfg.compile:
        train_model = compile_model(wrapped, target)

    run = _Run(cfg=cfg, target=target, world=world, main=main, run_dir=run_dir, log=log, ui=ui, manager=manager,
               strategy=strategy, inputs=inputs, model=model, optimizer=optimizer, scheduler=scheduler, amp=amp,
               num_classes=num_classes, steps_per_epoch=steps_per_epoch, total_steps=total_steps)
    if main:
        _announce(run, resume_path, step)

    # ---- 6. Train -----------------------------------------------------------------------------------
    last = {"train_loss": None, "val_loss": None, "val_top1": None, "val_top5": None}
    total_bad, last_ckpt, epochs_completed = 0, None, start_epoch
    meter = _Meter(target.device)
    halted = False      # a stop signal reached some rank: every rank agreed to stop after the same step
    compile_s = None    # --compile: the first step of this process compiles; it is warm-up (see _Meter.warm_up)
    step_started = None  # when that step's first batch had arrived (the loader's start-up is not compile time)
    for epoch in range(start_epoch, cfg.epochs):
        halted = halted or _stop_agreed(stop, target)   # a signal during start-up or the last evaluation
        if step >= total_steps or halted:
            break
        # This epoch's shuffle and augmentation: a function of (seed, epoch, index), the same for any
        # worker count; each rank takes its own shard. On resume, continue after the batches the
        # checkpointed run had already consumed.
        train_loader.set_epoch(epoch)
        epoch_loss_sum, epoch_steps = 0.0, 0
        if resume_loader is not None:
            train_loader.load_state_dict(_same_position(resume_loader, train_loader.state_dict()))
            epoch_loss_sum, epoch_steps = float(progress["epoch_loss_sum"]), int(progress["epoch_steps"])
        micro = train_loader.state_dict()["batches_done"]      # micro-batches consumed in this epoch
        resume_loader = None
        skipped_before = len(train_loader.stats.skipped) + len(val_loader.stats.skipped)
        step_before = step
        model.train()
        ui.start_epoch(epoch, cfg.epochs, steps_per_epoch, done=micro // cfg.accum_steps)
        meter.start_epoch()
        step_loss = torch.zeros((), device=target.device)   # device-side: adding to it does not sync

        for images, labels in train_loader:     # float [B, 3, S, S] normalised, int64 [B]; on the device
            micro += 1
            sync_now = micro % cfg.accum_steps == 0
            if labels.numel() == 0:
                # Every file of this batch was unreadable (bad_files=skip): nothing to learn from, so
                # no step either. (Under DDP the other ranks would wait for this one: rare, documented.)
                continue
            if cfg.compile and compile_s is None and step_started is None:
                step_started = time.perf_counter()      # the batch is here: what follows is the compiling step
            # Accumulating: skip the gradient all-reduce / reduce-scatter on all but the last micro-batch.
            with strategy.accumulate(wrapped, sync_now):
                with amp.autocast():
                    logits = train_model(images)                         # [B, num_classes]
                    loss = criterion(logits, labels) / cfg.accum_steps   # scalar, mean over the batch
                amp.backward(loss)
            step_loss += loss.detach()
            meter.images += labels.shape[0]
            if not sync_now:
                continue

            # One optimizer step: unscale (fp16), clip, step; a step skipped for overflow does not
            # advance the LR schedule. amp.step syncs only when a GradScaler is active.
            stepped = amp.step(optimizer, clip_grad_norm=cfg.clip_grad_norm)
            optimizer.zero_grad(set_to_none=True)
            if stepped:
                scheduler.step()
            step += 1
            epoch_steps += 1
            meter.add_step(step_loss)
            step_loss = torch.zeros((), device=target.device)
            if cfg.compile and compile_s is None:
                compile_s = meter.warm_up(step_started)
                log.write("compile", step=step, backend=compile_backend_name(target),
                          seconds=round(compile_s, 2))
                if main:
                    ui.print(compile_line(compile_s, compile_backend_name(target)))
            step_in_epoch = micro // cfg.accum_steps
            ui.tick(step_in_epoch)
            for callback in callbacks:
                callback(step=step, epoch=epoch, rank=rank)
            halted = _stop_agreed(stop, target)   # SIGTERM / SIGINT: this step is done; log and save, then stop

            if step % cfg.log_every == 0 or step == total_steps or step_in_epoch == steps_per_epoch or halted:
                # Sync point: .item() waits for the device; the mean over ranks is one more all-reduce.
                local_loss, seconds = meter.read()
                mean_loss = dist.all_reduce_mean(local_loss, target)
                if not math.isfinite(mean_loss):
                    _stop_non_finite(ui, log, step, epoch, mean_loss, manager)
                epoch_loss_sum += mean_loss * meter.steps
                eta = (total_steps - step) * seconds / meter.steps
                ips = meter.close_window(world, seconds)
                log.write("step", step=step, epoch=epoch, loss=mean_loss, lr=optimizer.param_groups[0]["lr"],
                          images_per_s=round(ips, 1) if ips is not None else None, loss_scale=_scale(amp))
                ui.update(step_in_epoch, steps_per_epoch, loss=mean_loss, ips=ips or 0.0, eta_s=eta)

            save_now = (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or halted   # halted: a stop signal
            if save_now and step_in_epoch < steps_per_epoch:
                last_ckpt = _save(run, meter.loss, progress={"epoch": epoch, "step": step, "epoch_done": False,
                                                             "loader": train_loader.state_dict(),
                                                             "epoch_loss_sum": epoch_loss_sum, "epoch_steps": epoch_steps})
            if step_in_epoch >= steps_per_epoch or step >= total_steps or halted:
                break   # trailing micro-batches that cannot fill an accumulation group are dropped
        ui.end_epoch()
        if halted and step_in_epoch < steps_per_epoch and step < total_steps:
            break   # stopped mid-epoch (checkpoint written above); no evaluation: the grace period is short
        if step == step_before:
            _stop_no_steps(epoch, train_loader.stats.skipped[skipped_before:], inputs.root)
        epoch_time = time.perf_counter() - meter.t_epoch

        # ---- 7. Evaluate ------------------------------------------------------------------------------
        val = evaluate(model, val_loader, target, amp, criterion, num_classes)
        new_bad = (train_loader.stats.skipped + val_loader.stats.skipped)[skipped_before:]
        bad_count = int(round(dist.all_reduce_mean(len(new_bad), target) * world))
        total_bad += bad_count
        last = {"train_loss": epoch_loss_sum / max(1, epoch_steps), "val_loss": val["loss"],
                "val_top1": val["top1"], "val_top5": val["top5"]}
        epoch_ips = meter.epoch_images / max(epoch_time - meter.epoch_warmup_s, 1e-9)   # warm-up excluded
        log.write("epoch", epoch=epoch, step=step, **last, lr=optimizer.param_groups[0]["lr"],
                  images_per_s=round(epoch_ips, 1), epoch_time_s=round(epoch_time, 2), bad_files=bad_count)
        ui.print(_epoch_line(epoch, cfg.epochs, last, epoch_ips, epoch_time))
        if bad_count or inputs.skipped_files:
            _report_bad(ui, log, epoch, [str(r) for _, r in new_bad], bad_count, inputs.skipped_files)
        # A max_steps stop mid-epoch is saved as "not done", so a longer resumed run continues the epoch.
        epoch_done = micro // cfg.accum_steps >= steps_per_epoch
        epochs_completed = epoch + 1 if epoch_done else epoch
        last_ckpt = _save(run, meter.loss, progress={"epoch": epoch, "step": step, "epoch_done": epoch_done,
                                                     "loader": train_loader.state_dict(),
                                                     "epoch_loss_sum": epoch_loss_sum,
                                                     "epoch_steps": epoch_steps}) or last_ckpt

    # ---- 8. Wrap up -----------------------------------------------------------------------------------
    result = TrainResult(
        run_dir=str(run_dir), device=str(target), precision=amp.precision, world_size=world,
        epochs_completed=epochs_completed, steps=step, **last,
        images_per_s=round(meter.total_images / meter.total_time, 1) if meter.total_time else 0.0,
        wall_s=round(time.time() - t_start, 1), bad_files=total_bad,
        resumed_from=str(resume_path) if resume_path else None,
        last_checkpoint=str(last_ckpt) if last_ckpt else (str(manager.latest()) if manager.latest() else None),
        compile_s=round(compile_s, 2) if compile_s is not None else None,
    )
    result.stopped = stop.requested if halted else None
    if main:
        _report_run(run, result)   # summary.json, curves.png, the closing line
    if halted:
        _stop_cleanly(run, train_loader, val_loader, stop, result)
    log.close()
    # Stop the loaders' persistent worker processes now rather than whenever the garbage collector
    # finds them (matters when train() is called several times in one process, e.g. from tests).
    for loader in (train_loader, val_loader):
        getattr(loader, "close", lambda: None)()
    del inputs, train_loader, val_loader
    gc.collect()
    dist.barrier()
    return result


def _stop_agreed(stop, target) -> bool:
    """True on every rank when any rank got a stop signal (one small all-reduce when distributed)."""
    from torchport.runtime import distributed as dist

    if dist.world_size() == 1:
        return stop.requested is not None
    return dist.all_reduce_mean(1.0 if stop.requested else 0.0, target) > 0.0


def _stop_cleanly(run: "_Run", train_loader, val_loader, stop, result: TrainResult) -> None:
    """After a stop signal: stop the workers, write the ``stopped`` record, raise with the resume command."""
    for loader in (train_loader, val_loader):
        getattr(loader, "close", lambda: None)()
    latest = run.manager.latest()
    command = stop.resume
    run.log.write("stopped", signal=stop.requested, checkpoint=str(latest) if latest else None, resume=command)
    run.log.close()
    error = stop.error(f"stopped by {stop.requested}; checkpoint {latest or '(none written yet)'}; "
                       f"resume with: {command}")
    error.result = result       # the CLI still writes --json from it
    raise error


def evaluate(model, loader, target, amp, criterion, num_classes) -> dict[str, Any]:
    """Loss, top-1 and top-5 accuracy over this rank's shard, summed over ranks (exact totals).
    Top-5 is None with 5 classes or fewer (it would be trivially 100%)."""
    import torch

    from torchport.runtime import distributed as dist
    from torchport.train.metrics import topk_correct

    model.eval()
    loader.set_epoch(0)
    sums = torch.zeros(4, dtype=torch.float64)   # loss*n, top1, top5, n   (host side: summed per batch)
    with torch.no_grad():
        for images, labels in loader:
            if labels.numel() == 0:
                continue
            with amp.autocast():
                logits = model(images).float()                  # [B, num_classes]
            top1, top5 = topk_correct(logits, labels, (1, 5))
            # One small device->host copy per batch (eval is not the hot loop).
            batch = torch.stack([criterion(logits, labels) * labels.shape[0], top1.float(), top5.float(),
                                 torch.tensor(float(labels.shape[0]), device=logits.device)])
            sums += batch.cpu().double()   # (float64 after the copy: not every device has it)
    totals = [dist.all_reduce_mean(float(v), target) for v in sums]   # means; ratios of means = ratios of sums
    n = totals[3]
    return {
        "loss": totals[0] / n if n else None,
        "top1": totals[1] / n if n else None,
        "top5": (totals[2] / n if n else None) if num_classes > 5 else None,
    }


# ---- helpers (kept out of the loop body so it reads in one sitting) ------------------------------------
@dataclasses.dataclass
class _Run:
    """The run's parts, bundled for the helpers below (instead of a dozen positional parameters)."""

    cfg: TrainConfig
    target: Any
    world: int
    main: bool
    run_dir: Any
    log: Any
    ui: Any
    manager: Any
    strategy: Any
    inputs: Any
    model: Any
    optimizer: Any
    scheduler: Any
    amp: Any
    num_classes: int
    steps_per_epoch: int
    total_steps: int


def _build_model(cfg: TrainConfig, target: Any, num_classes: int):
    """The model on ``target``, in its memory format."""
    import torch

    from torchport.models import build_model

    model = build_model(cfg.model, num_classes=num_classes, image_size=cfg.image_size).to(target.device)
    return model.to(memory_format=torch.channels_last if cfg.channels_last else torch.contiguous_format)


def _build_optimizer(cfg: TrainConfig, model: Any, steps_per_epoch: int, total_steps: int):
    """``(optimizer, scheduler)``: the LR schedule in optimizer steps (warmup, then cosine / step / constant)."""
    import torch

    from torchport.train.optim import LrSchedule, build_optimizer

    optimizer = build_optimizer(model, name=cfg.optimizer, lr=cfg.lr, momentum=cfg.momentum,
                                weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, LrSchedule(
        kind=cfg.schedule, warmup=int(round(cfg.warmup_epochs * steps_per_epoch)), total=total_steps,
        step_size=cfg.lr_step_epochs * steps_per_epoch, gamma=cfg.lr_gamma))
    return optimizer, scheduler


def _same_position(saved: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    """A mid-epoch loader position saved with another world size, as this run's position -- when it is the same
    point of the same sample order: same global batch (batch_size x world_size) and the global order (ranks take
    strided slices, so global batch k holds the same samples for any world size). Otherwise unchanged (the
    loader then names what differs)."""
    if (saved.get("world_size") == mine.get("world_size") or saved.get("order", "global") != "global"
            or mine.get("order", "global") != "global"):
        return saved
    if saved.get("batch_size", 0) * saved.get("world_size", 0) != mine["batch_size"] * mine["world_size"]:
        raise ConfigError(
            f"the checkpoint stopped mid-epoch with {saved.get('world_size')} process(es) x batch size "
            f"{saved.get('batch_size')}; to continue that epoch on {mine['world_size']} process(es) keep the global "
            f"batch: --batch-size {saved.get('batch_size', 0) * saved.get('world_size', 0) // mine['world_size']} "
            "(when it divides), or resume from an epoch-end checkpoint")
    return {**saved, "batch_size": mine["batch_size"], "world_size": mine["world_size"]}


class _Meter:
    """Loss and throughput between two log points, plus epoch and run totals.

    The loss sum stays on the device (adding to it does not sync); :meth:`read` is the sync point.
    ``images`` counts this rank's images in the current window.
    """

    def __init__(self, device: Any) -> None:
        import torch

        self.loss = torch.zeros((), device=device)
        self.steps = self.images = 0
        self.t0 = self.t_epoch = time.perf_counter()
        self.epoch_images, self.total_images, self.total_time = 0, 0, 0.0
        self.epoch_warmup_s = 0.0

    def start_epoch(self) -> None:
        """Begin an epoch (and a fresh window)."""
        self.loss.zero_()
        self.steps = self.images = self.epoch_images = 0
        self.epoch_warmup_s = 0.0
        self.t0 = self.t_epoch = time.perf_counter()

    def warm_up(self, started: float) -> float:
        """The step since ``started`` (the first compiled step, from when its first batch had arrived: compile
        time) is warm-up: its seconds and images leave the throughput figures, while the wait for the data
        before it stays in the window, as in an eager run (its loss stays too). Syncs the device; returns the
        step's seconds."""
        self.loss.item()
        now = time.perf_counter()
        seconds = now - started
        self.images, self.t0 = 0, self.t0 + seconds
        self.epoch_warmup_s += seconds
        return seconds

    def add_step(self, step_loss: Any) -> None:
        """Count one optimizer step and its (device-side) loss."""
        self.loss += step_loss
        self.steps += 1

    def read(self) -> tuple[float, float]:
        """``(mean loss per step on this rank, seconds since the window began)`` -- syncs the device."""
        return self.loss.item() / max(1, self.steps), time.perf_counter() - self.t0

    def close_window(self, world: int, seconds: float) -> float | None:
        """Add the window to the totals and start the next; returns images/s over all ranks (None for a window
        that held only the warm-up step)."""
        images = self.images * world
        self.epoch_images += images
        self.total_images += images
        self.total_time += seconds
        self.loss.zero_()
        self.steps = self.images = 0
        self.t0 = time.perf_counter()
        return images / max(seconds, 1e-9) if images else None


def _scale(amp) -> float | None:
    return float(amp.scaler.get_scale()) if amp.scaler is not None else None


def _save(run: "_Run", window_loss, *, progress):
    """Checkpoint through the strategy (ddp: rank 0 writes a file; fsdp: every rank its shards) -- never a
    poisoned state: every rank agrees the weights and the losses since the last log are finite first."""
    path = run.strategy.save(run.manager, step=progress["step"], model=run.model, optimizer=run.optimizer,
                             amp=run.amp, scheduler=run.scheduler, progress=progress, config=run.cfg.to_dict(),
                             window_loss=window_loss.item())
    if run.main:
        run.log.write("checkpoint", step=progress["step"], epoch=progress["epoch"], path=str(path))
    return path


def _stop_non_finite(ui, log, step, epoch, value, manager) -> None:
    latest = manager.latest()
    msg = (f"loss is {value} at step {step} (epoch {epoch + 1}): training diverged beyond what loss scaling "
           f"absorbs. Stopped; the last good checkpoint is {latest or '(none written yet)'}. Try a lower --lr, "
           "--clip-grad-norm 1.0, a longer warmup or --precision bf16/fp32, then --resume auto.")
    log.write("error", step=step, epoch=epoch, error="non_finite_loss", message=msg)
    ui.end_epoch()
    raise NonFiniteLossError(msg)


def _epoch_line(epoch, epochs, last, ips, secs) -> str:
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    val_loss = "-" if last["val_loss"] is None else f"{last['val_loss']:.4f}"
    return (f"epoch {epoch + 1}/{epochs}: train loss {last['train_loss']:.4f}  val loss {val_loss}  "
            f"top-1 {pct(last['val_top1'])}  top-5 {pct(last['val_top5'])}  {ips:,.0f} img/s  {secs:.1f}s")


def _report_run(run: _Run, result: TrainResult) -> None:
    """Rank 0's wrap-up: best val top-1 over every epoch of the run dir (resumed runs included),
    ``curves.png``, ``summary.json``, the ``run`` record and one closing line."""
    from torchport._json import write_json
    from torchport.errors import WriteError
    from torchport.train.metrics import epoch_records, summary_line, write_curves

    records = epoch_records(run.run_dir)        # metrics.jsonl is line-buffered: this run's epochs are in
    tops = [r["val_top1"] for r in records if isinstance(r.get("val_top1"), (int, float))]
    result.best_val_top1 = max(tops) if tops else None
    try:
        write_json(run.run_dir / "summary.json", dataclasses.asdict(result))
        write_curves(run.run_dir, records)
        run.log.write("run", **dataclasses.asdict(result))
    except (WriteError, OSError) as exc:  # disk full after training: the checkpoint is safe, say so
        raise WriteError(f"training finished (last checkpoint {result.last_checkpoint or '-'}) but the run summary "
                         f"could not be written: {exc}") from None
    run.ui.print(summary_line(result, result.best_val_top1))


def _stop_no_steps(epoch: int, skipped: list, data: str) -> None:
    """An epoch that took no optimizer step trained on nothing: that is an error, never a success."""
    from torchport.train.data import DataError

    why = (f"all {len(skipped)} sample(s) read were skipped as unreadable (first: {skipped[0][1]})" if skipped
           else "the training loader yielded no full batch")
    raise DataError(f"epoch {epoch + 1} took no optimizer step: {why}; run `torchport data verify {data}`, "
                    "then re-pack or restore the data")


def _report_bad(ui, log, epoch, paths, count, skipped) -> None:
    from torchport._escape import terminal_name   # file names from the data set: shown, never interpreted

    if count:
        shown = ", ".join(map(terminal_name, paths[:3])) + (" ..." if len(paths) > 3 else "")
        ui.print(f"[yellow]skipped {count} unreadable image file(s) this epoch[/yellow]: {shown}")
    if skipped:
        ui.print(f"[yellow]ignored {len(skipped)} non-image file(s) or link(s) out of the data set[/yellow]: {', '.join(map(terminal_name, skipped[:3]))}"
                 + (" ..." if len(skipped) > 3 else ""))
    log.write("bad_files", epoch=epoch, unreadable=count, unreadable_paths=paths[:100],
              non_image=len(skipped), non_image_paths=skipped[:100])


def _announce(run: "_Run", resume_path, step: int) -> None:
    ui, log, cfg, target, amp, inputs = run.ui, run.log, run.cfg, run.target, run.amp, run.inputs
    world, num_classes, steps_per_epoch, total_steps = run.world, run.num_classes, run.steps_per_epoch, run.total_steps
    run_dir = run.run_dir
    for note in inputs.notes + ([log.tb_note] if log.tb_note else []):
        ui.print(note)
    why = target.backend.amp.reason() if amp.requested == "auto" else None   # the CPU says what it found
    ui.print(f"device {target} ({target.reason}), precision {amp.precision}{f' (auto: {why})' if why else ''}, "
             f"world size {world}, "
             f"model {cfg.model} ({num_classes} classes, {cfg.image_size}px)")
    ui.print(f"{inputs.num_train} train / {inputs.num_val} val images, {steps_per_epoch} steps/epoch, "
             f"{total_steps} steps total, run dir {run_dir}")
    if resume_path is not None:
        ui.print(f"resumed from {resume_path} at step {step}")
    log.write("start", device=str(target), precision=amp.precision, world_size=world, model=cfg.model,
              num_classes=num_classes, classes=inputs.classes, num_train=inputs.num_train, num_val=inputs.num_val,
              steps_per_epoch=steps_per_epoch, total_steps=total_steps, resumed_from=str(resume_path or ""),
              step=step, config=cfg.to_dict())
