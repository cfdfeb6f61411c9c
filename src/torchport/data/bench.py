"""``torchport bench data``: the PIL baseline vs every torchport mode, same workers, same run.

What is measured: images per second delivered by the loader to the training loop -- normalised
float32 batches, end to end through a DataLoader with the same ``num_workers`` for every pipeline.
The data set is realistic (photographs, ~500x375, quality 90; :mod:`torchport.data.photos`),
built and packed once in the cache directory. Pipelines are measured in interleaved rounds
(baseline, jpeg, predecoded, folder, baseline, ...) and the median of each is reported, so a
noisy neighbour affects all of them alike; ratios are against the baseline of the same run.

The training-step experiment runs a small CNN on the selected device (CPU by default) fed by
each pipeline and reports step time, the share of it spent waiting for data, and the cut.

Example::

    result = run_bench(BenchConfig(count=1024, workers=2))
    print(result["results"]["jpeg"]["ratio_vs_baseline"])
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["BenchConfig", "run_bench", "render_table", "render_png", "register_bench_data", "TARGETS"]

TARGETS = {"jpeg": 2.5, "predecoded": 8.0}
MODES = ("jpeg", "predecoded", "folder")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Benchmark settings.

    Args:
        count: photos in the generated set. root: use this ImageFolder instead.
        batch_size, workers, size: loader settings shared by every pipeline.
        seconds: measuring time per pipeline per round. rounds: interleaved rounds (median).
        modes: torchport modes to run (``jpeg``, ``predecoded``, ``folder``).
        predecoded_size: shorter side of pre-decoded shards.
        train_step: also run the training-step experiment (same interleaved rounds, median run).
        step_batches: steps timed per pipeline per round.
        device: device for the training step (``cpu``, ``npu`` ... ; ``auto`` = torchport's choice).
    """

    count: int = 1024
    root: str | None = None
    batch_size: int = 64
    workers: int = 2
    size: int = 224
    seconds: float = 4.0
    rounds: int = 3
    modes: tuple[str, ...] = MODES
    predecoded_size: int = 256
    train_step: bool = True
    step_batches: int = 16
    device: str | None = "cpu"

    def __post_init__(self) -> None:
        bad = [m for m in self.modes if m not in MODES]
        if bad:
            raise ValueError(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")


def _prepare(cfg: BenchConfig, log: Callable[[str], None]) -> dict[str, Path]:
    from torchport.data.format import ShardSet, is_shard_dir
    from torchport.data.pack import pack
    from torchport.data.photos import photos_cache
    from torchport.data.synth import cache_dir

    if cfg.root:
        src = Path(cfg.root)
    else:
        log(f"photo set: {cfg.count} images (built once in {cache_dir()})")
        src = photos_cache(cfg.count)
    paths = {"src": src}
    tag = f"{src.name}-{abs(hash(str(src.resolve()))) % 10**8}" if cfg.root else src.name
    for mode in ("jpeg", "predecoded"):
        if mode not in cfg.modes:
            continue
        dst = cache_dir() / "bench-shards" / (f"{tag}-{mode}" + ("" if mode == "jpeg" else f"{cfg.predecoded_size}"))
        ok = False
        if is_shard_dir(dst):
            try:
                ShardSet.open(dst, verify="quick")
                ok = True
            except Exception:
                ok = False
        if not ok:
            log(f"packing {mode} shards -> {dst}")
            pack(src, dst, mode=mode, size=cfg.predecoded_size, overwrite=True, workers=cfg.workers or None)
        paths[mode] = dst
    return paths


def _pipelines(cfg: BenchConfig, paths: dict[str, Path], target: Any) -> dict[str, Callable[[], Any]]:
    from torchport.data.baseline import baseline_loader
    from torchport.data.loader import make_loader

    common = dict(batch_size=cfg.batch_size, num_workers=cfg.workers, train=True, image_size=cfg.size, seed=0, target=target)
    out: dict[str, Callable[[], Any]] = {
        "baseline": lambda: baseline_loader(paths["src"], batch_size=cfg.batch_size, num_workers=cfg.workers, size=cfg.size)
    }
    for mode in cfg.modes:
        path = paths["src"] if mode == "folder" else paths[mode]
        out[mode] = (lambda p=path: make_loader(p, augment="cpu", verify="quick", **common))
    return out


def _forever(loader):
    epoch = 0
    while True:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        epoch += 1
        yield from loader


def _cpu_seconds() -> float | None:
    """CPU time (user + system) of this process and its live children (the DataLoader workers); Linux only."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        pids = {os.getpid()}
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                continue
        return total / tick
    except (OSError, ValueError, AttributeError):
        return None


def _measure(loader, seconds: float, warmup: int = 3) -> tuple[float, float | None]:
    """(images/s, CPU ms per image over the main process and its workers)."""
    gen = _forever(loader)
    try:
        for _ in range(warmup):
            next(gen)
        c0 = _cpu_seconds()
        n, t0 = 0, time.perf_counter()
        while (time.perf_counter() - t0) < seconds:
            n += int(next(gen)[0].shape[0])
        rate = n / (time.perf_counter() - t0)
        c1 = _cpu_seconds()
        cpu = None if c0 is None or c1 is None else 1000 * (c1 - c0) / max(1, n)
        return rate, cpu
    finally:
        gen.close()


def _train_steps(loader, target: Any, steps: int, num_classes: int, warmup: int = 3) -> dict[str, float]:
    """Time ``steps`` SGD steps; return step time and the part spent waiting for data."""
    import torch

    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers own the other cores; OpenMP threads in the main process would fight them
    from torchport.models import patchnet
    from torchport.runtime.amp import Amp
    from torchport.runtime.step import train_step

    model = patchnet(num_classes).to(target.device)
    amp = Amp("fp32", target)   # a no-op: the step measures the input pipeline
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = _forever(loader)
    wait = 0.0
    try:
        for i in range(warmup + steps):
            if i == warmup:
                t0, wait = time.perf_counter(), 0.0
            tw = time.perf_counter()
            batch = next(gen)
            wait += time.perf_counter() - tw
            loss, _ = train_step(model, batch, opt, amp, torch.nn.functional.cross_entropy, device=target.device)
            loss.item()  # sync point: the step is finished
        total = time.perf_counter() - t0
    finally:
        gen.close()
        torch.set_num_threads(threads)
    return {"step_ms": 1000 * total / steps, "data_wait_ms": 1000 * wait / steps, "data_share": wait / total}


def run_bench(cfg: BenchConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run the benchmark; return the result record (see module docstring)."""
    import torch

    from torchport import backends
    from torchport.runtime.device import Target, select_device

    target = select_device(cfg.device, warn=False)  # for the training step
    cpu = Target(backend=backends.get("cpu"), index=0, reason="argument")  # throughput: batches on the host
    paths = _prepare(cfg, log)
    makers = _pipelines(cfg, paths, cpu)
    loaders = {name: make() for name, make in makers.items()}
    samples: dict[str, list[float]] = {name: [] for name in loaders}
    cpu_ms: dict[str, list[float]] = {name: [] for name in loaders}
    for r in range(cfg.rounds):
        for name, loader in loaders.items():
            rate, cpu = _measure(loader, cfg.seconds)
            samples[name].append(rate)
            if cpu is not None:
                cpu_ms[name].append(cpu)
            log(f"round {r + 1}/{cfg.rounds}: {name:<10} {rate:8.0f} img/s" + (f"  {cpu:.2f} CPU-ms/img" if cpu else ""))
            time.sleep(1.0)  # let this pipeline's workers finish their prefetch before the next one runs
    base = statistics.median(samples["baseline"])
    base_cpu = statistics.median(cpu_ms["baseline"]) if cpu_ms["baseline"] else None
    results: dict[str, Any] = {}
    for name, vals in samples.items():
        med = statistics.median(vals)
        results[name] = {
            "images_per_s": round(med, 1),
            "ratio_vs_baseline": round(med / base, 3),
            "rounds": [round(v, 1) for v in vals],
        }
        if cpu_ms[name] and base_cpu:
            c = statistics.median(cpu_ms[name])
            results[name]["cpu_ms_per_image"] = round(c, 3)
            results[name]["cpu_efficiency_vs_baseline"] = round(base_cpu / c, 3)
        if name in TARGETS:
            results[name]["target_ratio"] = TARGETS[name]
            results[name]["meets_target"] = med / base >= TARGETS[name]
    out: dict[str, Any] = {
        "benchmark": "torchport bench data",
        "config": dataclasses.asdict(cfg),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "dataset": {"source": str(paths["src"]), **{k: str(v) for k, v in paths.items() if k != "src"}},
        "results": results,
    }
    if cfg.train_step:
        ncls = len([d for d in os.scandir(paths["src"]) if d.is_dir()])
        from torchport.data.loader import make_loader

        step_loaders = {"baseline": loaders["baseline"]}
        for mode in ("jpeg", "predecoded"):
            if mode in cfg.modes:
                step_loaders[mode] = make_loader(
                    paths[mode], batch_size=cfg.batch_size, num_workers=cfg.workers, train=True, image_size=cfg.size,
                    seed=0, target=target, augment="cpu", verify="quick",
                )
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in step_loaders}
        for r in range(cfg.rounds):  # interleaved like the throughput rounds; the median run is reported
            for name, loader in step_loaders.items():
                res = _train_steps(loader, target, cfg.step_batches, ncls)
                runs[name].append(res)
                log(f"round {r + 1}/{cfg.rounds}: train step ({target}) {name:<10} {res['step_ms']:7.1f} ms/step, "
                    f"data {100 * res['data_share']:.0f}%")
                time.sleep(1.0)
        steps: dict[str, Any] = {}
        for name, rs in runs.items():
            med = sorted(rs, key=lambda x: x["step_ms"])[len(rs) // 2]
            steps[name] = {k: round(v, 3) for k, v in med.items()}
            steps[name]["rounds_ms"] = [round(x["step_ms"], 1) for x in rs]
        b = steps["baseline"]["step_ms"]
        for name in steps:
            steps[name]["step_time_cut"] = round(1 - steps[name]["step_ms"] / b, 3)
        out["train_step"] = {
            "device": str(target),
            "model": "patchify conv8x8/8 - conv3x3/2 - pool - linear (tiny CNN, 1 main thread)",
            "targets": {"baseline_data_share_min": 0.5, "step_time_cut_min": 0.4},
            "results": steps,
        }
    return out


def render_table(result: dict[str, Any]):
    """A rich Table of the throughput results (and one for the training step)."""
    from rich.table import Table

    cfg = result["config"]
    t = Table(title=f"input pipeline: images/s through DataLoader ({cfg['workers']} workers, batch {cfg['batch_size']}, {cfg['size']}px)")
    for col in ("pipeline", "images/s", "vs baseline", "target", "CPU ms/img", "CPU efficiency", "rounds"):
        t.add_column(col, justify="right" if col != "pipeline" else "left")
    for name, r in result["results"].items():
        tgt = r.get("target_ratio")
        mark = "" if tgt is None else (f"[green]>= {tgt}x ok[/]" if r["meets_target"] else f"[red]>= {tgt}x missed[/]")
        cpu = f"{r['cpu_ms_per_image']:.2f}" if "cpu_ms_per_image" in r else "-"
        eff = f"{r['cpu_efficiency_vs_baseline']:.2f}x" if "cpu_efficiency_vs_baseline" in r else "-"
        t.add_row(name, f"{r['images_per_s']:.0f}", f"{r['ratio_vs_baseline']:.2f}x", mark, cpu, eff,
                  " ".join(f"{v:.0f}" for v in r["rounds"]))
    tables = [t]
    ts = result.get("train_step")
    if ts:
        s = Table(title=f"training step on {ts['device']}: {ts['model']}")
        for col in ("pipeline", "ms/step", "data wait ms", "data share", "step time cut"):
            s.add_column(col, justify="right" if col != "pipeline" else "left")
        for name, r in ts["results"].items():
            s.add_row(name, f"{r['step_ms']:.1f}", f"{r['data_wait_ms']:.1f}", f"{100 * r['data_share']:.0f}%", f"{100 * r['step_time_cut']:.0f}%")
        tables.append(s)
    return tables


def render_png(result: dict[str, Any], path: str | os.PathLike) -> None:
    """Bar chart of images/s per pipeline (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["results"])
    vals = [result["results"][n]["images_per_s"] for n in names]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=120)
    bars = ax.bar(names, vals, color=["#999999"] + ["#2b7bba"] * (len(names) - 1))
    for b, n in zip(bars, names):
        ax.annotate(f"{result['results'][n]['ratio_vs_baseline']:.2f}x", (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=9)
    cfg = result["config"]
    ax.set_ylabel("images / s")
    ax.set_title(f"input pipeline, {cfg['workers']} workers, batch {cfg['batch_size']}, {cfg['size']}px photos")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def register_bench_data(bench_app, name: str = "data", *, deprecated_as: str | None = None) -> None:
    """Add this benchmark as sub-command ``name`` of a typer app (``torchport data bench``; the old spelling
    ``torchport bench data`` is registered hidden with ``deprecated_as``, and warns)."""
    import typer

    from torchport.cli._options import alias, device_arg, device_option, json_option, renamed, warn_deprecated, write_json

    @bench_app.command(name, hidden=deprecated_as is not None)
    def bench_data(
        count: int = typer.Option(1024, help="photos in the generated benchmark set"),
        root: str = typer.Option(None, help="use this ImageFolder of JPEGs instead of the generated set"),
        workers: int = typer.Option(2, help="DataLoader workers, the same for every pipeline"),
        batch_size: int = typer.Option(64, "--batch-size"),
        image_size: int = typer.Option(224, "--image-size", help="output image side"),
        seconds: float = typer.Option(4.0, help="measuring time per pipeline per round"),
        rounds: int = typer.Option(3, help="interleaved rounds; the median is reported"),
        modes: str = typer.Option(",".join(MODES), help="comma-separated torchport modes"),
        train_step: bool = typer.Option(True, "--train-step/--no-train-step", help="also time training steps"),
        device: str = device_option(),
        json_out: Path = json_option("the result"),
        png: Path = typer.Option(None, help="write a bar chart PNG"),
        check: bool = typer.Option(False, help="exit 1 when a throughput target is missed"),
        size: int = alias("--size"),
    ) -> None:
        """Images/s of the PIL baseline vs torchport's jpeg / predecoded / folder pipelines."""
        from rich.console import Console

        if deprecated_as:
            warn_deprecated(deprecated_as, f"torchport {deprecated_as}", "torchport data bench")
        size = renamed("data bench", "--image-size", image_size, "--size", size, default=224)
        console = Console(stderr=json_out is not None and str(json_out) == "-")
        cfg = BenchConfig(
            count=count, root=root, workers=workers, batch_size=batch_size, size=size, seconds=seconds, rounds=rounds,
            modes=tuple(m.strip() for m in modes.split(",") if m.strip()), train_step=train_step,
            device=device_arg(device),
        )
        result = run_bench(cfg, log=lambda s: console.print(f"[dim]{s}[/]"))
        for table in render_table(result):
            console.print(table)
        if write_json(json_out, result):
            console.print(f"wrote {json_out}")
        if png:
            render_png(result, png)
            console.print(f"wrote {png}")
        if check and not all(r.get("meets_target", True) for r in result["results"].values()):
            raise typer.Exit(1)
