"""``torchport data bench``: torchport's loader vs PIL, DALI (CPU) and torchvision.io, side by side.

What is measured: images per second delivered to the training loop -- normalised float32
``(B, 3, S, S)`` CPU batches after RandomResizedCrop(S) + flip -- from the same photos
(:mod:`torchport.data.photos`: ~500x375, quality 90), with the same CPU budget: ``workers``
DataLoader worker processes, or ``workers`` DALI threads. Each measurement runs in its own fresh
Python process (no warm caches, allocator state or leftover workers from another pipeline); the
pipelines take turns in interleaved rounds (pil, dali, torchvision-io, jpeg, predecoded, folder,
pil, ...) and the median of the rounds is reported, with ratios against PIL and against DALI-CPU
of the same run. A baseline whose package is missing is reported in one line and skipped.

Also in the record: the machine's load average before and after, its single-core ``memcpy``
bandwidth (numpy, measured between rounds) next to the bytes per second each torchport pipeline
implies, which JPEG decoder ran, a per-stage profile of a JPEG worker
(:mod:`torchport.data.bench_profile`), and the training-step experiment (a small CNN fed by
pil / jpeg / predecoded: step time, share spent waiting for data, and the cut).

Example::

    result = run_bench(BenchConfig(count=1024, workers=2))
    print(result["results"]["jpeg"]["ratio_vs_dali"])
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from torchport.data.bench_baselines import BASELINES, build_baseline, missing_baselines  # no numpy/torch at import

__all__ = ["BenchConfig", "run_bench", "render_table", "render_png", "register_bench_data", "TARGETS", "copy_bandwidth",
           "target_verdicts", "missing_photo_source"]

#: ratio targets (same run): pipeline -> {"vs_pil": x, "vs_dali": y}
TARGETS = {"jpeg": {"vs_pil": 3.5, "vs_dali": 2.0}, "predecoded": {"vs_pil": 15.0}}
MODES = ("jpeg", "predecoded", "folder")
LABELS = {
    "pil": "PIL ImageFolder baseline",
    "dali": "NVIDIA DALI, CPU-only",
    "torchvision-io": "torchvision.io.decode_jpeg + transforms.v2",
    "jpeg": "torchport jpeg shards",
    "predecoded": "torchport pre-decoded shards",
    "folder": "torchport ImageFolder (no packing)",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Benchmark settings.

    Args:
        count: photos in the generated set. root: use this ImageFolder instead.
        batch_size, workers, size: loader settings shared by every pipeline (``workers`` = DALI threads).
        seconds: measuring time per pipeline per round. rounds: interleaved rounds (median).
        modes: torchport modes to run (``jpeg``, ``predecoded``, ``folder``).
        baselines: other pipelines (``pil``, ``dali``, ``torchvision-io``); ``pil`` is always run
            (it is the reference of the ratios).
        predecoded_size: shorter side of pre-decoded shards.
        train_step: also run the training-step experiment (same interleaved rounds, median run).
        step_batches: steps timed per pipeline per round.
        device: device for the training step (``cpu``, ``npu`` ... ; ``auto`` = torchport's choice).
        profile: also profile a JPEG worker stage by stage.
    """

    count: int = 1024
    root: str | None = None
    batch_size: int = 64
    workers: int = 2
    size: int = 224
    seconds: float = 4.0
    rounds: int = 3
    modes: tuple[str, ...] = MODES
    baselines: tuple[str, ...] = BASELINES
    predecoded_size: int = 256
    train_step: bool = True
    step_batches: int = 16
    device: str | None = "cpu"
    profile: bool = True

    def __post_init__(self) -> None:
        bad = [m for m in self.modes if m not in MODES]
        if bad:
            raise ValueError(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
        bad = [b for b in self.baselines if b not in BASELINES]
        if bad:
            raise ValueError(f"unknown baseline(s) {bad}; choose from {', '.join(BASELINES)}")
        if "pil" not in self.baselines:
            object.__setattr__(self, "baselines", ("pil",) + tuple(self.baselines))


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
        # "-rst": jpeg shards packed with restart markers (older caches are packed again)
        dst = cache_dir() / "bench-shards" / (f"{tag}-{mode}" + ("-rst" if mode == "jpeg" else f"{cfg.predecoded_size}"))
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


def _make_pipeline(name: str, cfg: BenchConfig, paths: dict[str, str], target: Any) -> Any:
    """The iterable of ``(images, labels)`` batches for pipeline ``name`` (inside a child process)."""
    if name in BASELINES:
        return build_baseline(name, paths["src"], batch_size=cfg.batch_size, workers=cfg.workers, image_size=cfg.size)
    from torchport.data.loader import make_loader

    path = paths["src"] if name == "folder" else paths[name]
    return make_loader(path, batch_size=cfg.batch_size, num_workers=cfg.workers, train=True, image_size=cfg.size,
                       seed=0, target=target, augment="cpu", verify="quick")


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


def copy_bandwidth(nbytes: int = 128 << 20, reps: int = 5) -> float:
    """This machine's single-core memcpy bandwidth in bytes/s (numpy ``copyto`` of ``nbytes``, best of ``reps``)."""
    import numpy as np

    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return nbytes / best


# ------------------------------------------------------------------------------------------- child process
def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this (fresh) process: ``throughput``, ``train_step`` or ``profile``."""
    import torch

    from torchport import backends
    from torchport.runtime.device import Target, select_device

    cfg = BenchConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec["cfg"].items()})
    paths, task, name = spec["paths"], spec["task"], spec.get("pipeline")
    if task == "profile":
        from torchport.data.bench_profile import profile_jpeg

        return profile_jpeg(paths["jpeg"], image_size=cfg.size, batch_size=cfg.batch_size)
    if task == "throughput":
        cpu = Target(backend=backends.get("cpu"), index=0, reason="argument")  # batches on the host
        rate, cpu_ms = _measure(_make_pipeline(name, cfg, paths, cpu), cfg.seconds)
        return {"images_per_s": rate, "cpu_ms_per_image": cpu_ms, "load_avg_1m": os.getloadavg()[0]}
    if task == "train_step":
        target = select_device(cfg.device, warn=False)
        ncls = len([d for d in os.scandir(paths["src"]) if d.is_dir()])
        res = _train_steps(_make_pipeline(name, cfg, paths, target), target, cfg.step_batches, ncls)
        return {**res, "device": str(target), "torch": torch.__version__}
    raise ValueError(f"unknown task {task!r}")


def _child_main() -> None:
    """``python -m torchport.data.bench`` reads one JSON spec on stdin, prints one JSON result line."""
    spec = json.loads(sys.stdin.read())
    try:
        out = {"ok": True, **_child(spec)}
    except Exception as e:  # reported by the parent, which goes on with the other pipelines
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (DataLoader / DALI threads): the parent has its answer


def _run_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        r = subprocess.run([sys.executable, "-m", "torchport.data.bench"], input=json.dumps(spec), capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
    return {"ok": False, "error": f"child process failed: {tail}"}


# ------------------------------------------------------------------------------------------- parent
def _implied_bytes(paths: dict[str, Path], cfg: BenchConfig) -> dict[str, tuple[float, float]]:
    """pipeline -> (mean source bytes read per image, float32 bytes delivered per image)."""
    from torchport.data.format import ShardSet

    out_b = 3 * cfg.size * cfg.size * 4
    res = {}
    for mode in ("jpeg", "predecoded"):
        if mode in paths:
            s = ShardSet.open(paths[mode], verify="none")
            res[mode] = (float(s.index["nbytes"].mean()), float(out_b))
    return res


def run_bench(cfg: BenchConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run the benchmark; return the result record (see module docstring)."""
    import torch

    from torchport.data.decode import native_status

    load_before = list(os.getloadavg())
    paths = _prepare(cfg, log)
    spaths = {k: str(v) for k, v in paths.items()}
    missing = missing_baselines(cfg.baselines)
    for line in missing.values():
        log(line)
    names = [b for b in cfg.baselines if b not in missing] + list(cfg.modes)
    base_spec = {"cfg": dataclasses.asdict(cfg), "paths": spaths}
    timeout = 120 + 4 * cfg.seconds
    profile = None
    if cfg.profile and "jpeg" in cfg.modes:
        r = _run_child({**base_spec, "task": "profile"}, timeout)
        profile = r if r.get("ok") else {"error": r.get("error")}
        log(f"JPEG worker profile: {profile.get('stages_us', profile.get('error'))}")
    samples: dict[str, list[float]] = {n: [] for n in names}
    cpu_ms: dict[str, list[float]] = {n: [] for n in names}
    errors: dict[str, str] = {}
    bandwidth: list[float] = []
    for r in range(cfg.rounds):
        bandwidth.append(copy_bandwidth())
        for name in names:
            if name in errors:
                continue
            res = _run_child({**base_spec, "task": "throughput", "pipeline": name}, timeout)
            if not res.get("ok"):
                errors[name] = res.get("error", "failed")
                log(f"round {r + 1}/{cfg.rounds}: {name:<14} FAILED: {errors[name]}")
                continue
            samples[name].append(res["images_per_s"])
            if res.get("cpu_ms_per_image") is not None:
                cpu_ms[name].append(res["cpu_ms_per_image"])
            log(f"round {r + 1}/{cfg.rounds}: {name:<14} {res['images_per_s']:8.0f} img/s"
                + (f"  {res['cpu_ms_per_image']:.2f} CPU-ms/img" if res.get("cpu_ms_per_image") else "")
                + f"  (load {res['load_avg_1m']:.1f})")
    med = {n: statistics.median(v) for n, v in samples.items() if v}
    pil, dali = med.get("pil"), med.get("dali")
    implied = _implied_bytes(paths, cfg)
    bw = statistics.median(bandwidth)
    results: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {"label": LABELS[name], "kind": "baseline" if name in BASELINES else "torchport"}
        if name in errors:
            entry.update(status="failed", error=errors[name])
            results[name] = entry
            continue
        m = med[name]
        entry.update(status="ok", images_per_s=round(m, 1), rounds=[round(v, 1) for v in samples[name]])
        entry["ratio_vs_pil"] = round(m / pil, 3) if pil else None
        entry["ratio_vs_baseline"] = entry["ratio_vs_pil"]
        entry["ratio_vs_dali"] = round(m / dali, 3) if dali else None
        if cpu_ms[name]:
            entry["cpu_ms_per_image"] = round(statistics.median(cpu_ms[name]), 3)
            for ref in ("pil", "dali"):  # CPU time per image is robust to a noisy neighbour; wall rates are not
                if cpu_ms.get(ref) and ref not in errors:
                    entry[f"cpu_efficiency_vs_{ref}"] = round(statistics.median(cpu_ms[ref]) / entry["cpu_ms_per_image"], 3)
        if name in implied:
            src_b, out_b = implied[name]
            entry["source_bytes_per_image"] = round(src_b)
            entry["output_bytes_per_image"] = round(out_b)
            entry["implied_bytes_per_s"] = round(m * (src_b + out_b))
            entry["implied_vs_copy_bandwidth"] = round(m * (src_b + out_b) / bw, 3)
        if name in TARGETS:
            entry["targets"] = TARGETS[name]
            entry["target_verdicts"], entry["meets_target"] = target_verdicts(entry, TARGETS[name])
        results[name] = entry
    for name, line in missing.items():
        results[name] = {"label": LABELS[name], "kind": "baseline", "status": "skipped", "error": line}
    out: dict[str, Any] = {
        "benchmark": "torchport data bench",
        "config": dataclasses.asdict(cfg),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "load_avg_before": load_before,
            "load_avg_after": None,
            "copy_bandwidth_bytes_per_s": round(bw),
            "copy_bandwidth_rounds": [round(b) for b in bandwidth],
        },
        "jpeg_decoder": native_status(),
        "dataset": {"source": spaths["src"], **{k: v for k, v in spaths.items() if k != "src"}},
        "results": results,
        "profile": profile,
    }
    if cfg.train_step:
        step_names = [n for n in ("pil", "jpeg", "predecoded") if n in med]
        runs: dict[str, list[dict[str, float]]] = {n: [] for n in step_names}
        device = None
        for r in range(cfg.rounds):  # interleaved like the throughput rounds; the median run is reported
            for name in step_names:
                res = _run_child({**base_spec, "task": "train_step", "pipeline": name}, timeout + 60)
                if not res.get("ok"):
                    log(f"round {r + 1}/{cfg.rounds}: train step {name} FAILED: {res.get('error')}")
                    continue
                device = res["device"]
                runs[name].append(res)
                log(f"round {r + 1}/{cfg.rounds}: train step ({device}) {name:<10} {res['step_ms']:7.1f} ms/step, "
                    f"data {100 * res['data_share']:.0f}%")
        steps: dict[str, Any] = {}
        for name, rs in runs.items():
            if not rs:
                continue
            m = sorted(rs, key=lambda x: x["step_ms"])[len(rs) // 2]
            steps[name] = {k: round(m[k], 3) for k in ("step_ms", "data_wait_ms", "data_share")}
            steps[name]["rounds_ms"] = [round(x["step_ms"], 1) for x in rs]
        if "pil" in steps:
            b = steps["pil"]["step_ms"]
            for name in steps:
                steps[name]["step_time_cut"] = round(1 - steps[name]["step_ms"] / b, 3)
        out["train_step"] = {
            "device": device,
            "model": "patchify conv8x8/8 - conv3x3/2 - pool - linear (tiny CNN, 1 main thread)",
            "targets": {"baseline_data_share_min": 0.5, "step_time_cut_min": 0.4},
            "results": steps,
        }
    out["machine"]["load_avg_after"] = list(os.getloadavg())
    return out


def target_verdicts(entry: dict[str, Any], targets: dict[str, float]) -> tuple[dict[str, bool | None], bool | None]:
    """Each target's verdict -- True met, False missed, None not measured (its baseline did not run) -- and
    the overall one: False when any measured target is missed, None when none is missed but one was not
    measured (no verdict is claimed for a comparison that was not run), True when all were met."""
    verdicts: dict[str, bool | None] = {}
    for key, want in targets.items():
        ratio = entry.get(f"ratio_{key}")
        verdicts[key] = None if ratio is None else bool(ratio >= want)
    if any(v is False for v in verdicts.values()):
        return verdicts, False
    return verdicts, (None if any(v is None for v in verdicts.values()) else True)


def missing_photo_source(cfg: BenchConfig) -> str | None:
    """One line when the generated photo set is needed (no ``root``) and scikit-image is missing."""
    from torchport.data.bench_baselines import _importable

    if cfg.root or _importable("skimage"):
        return None
    return ("the generated benchmark photos need scikit-image, which is not installed: pip install 'torchport[bench]' "
            "(or pass --root DIR, an ImageFolder of your own JPEGs)")


def _target_cell(r: dict[str, Any]) -> str:
    """``3.5x/pil ok 2x/dali not measured`` -- each target with its own verdict."""
    verdicts = r.get("target_verdicts") or {}
    words = {True: "[green]ok[/]", False: "[red]missed[/]", None: "[yellow]not measured[/]"}
    return " ".join(f"{v:g}x/{k[3:]} {words[verdicts.get(k)]}" for k, v in r["targets"].items())


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def render_table(result: dict[str, Any]):
    """Rich tables: throughput (both ratio columns), the JPEG worker profile, the training step."""
    from rich.markup import escape
    from rich.table import Table

    cfg, mach = result["config"], result["machine"]
    bw = mach["copy_bandwidth_bytes_per_s"] / 1e9
    t = Table(
        title=f"input pipeline: images/s delivered as float32 batches ({cfg['workers']} workers / DALI threads, "
              f"batch {cfg['batch_size']}, {cfg['size']}px, median of {cfg['rounds']} rounds, fresh process each)",
        caption=f"load average before {mach['load_avg_before'][0]:.1f}, after {mach['load_avg_after'][0]:.1f} on "
                f"{mach['cpus']} CPUs; memcpy {bw:.1f} GB/s (1 core); JPEG decoder: {result['jpeg_decoder']}",
    )
    for col in ("pipeline", "img/s", "vs PIL", "vs DALI-CPU", "target", "CPU ms/img", "CPU vs PIL", "CPU vs DALI",
                "GB/s implied", "rounds"):
        t.add_column(col, justify="left" if col == "pipeline" else "right", no_wrap=col in ("pipeline", "rounds"))
    notes = []
    for name, r in result["results"].items():
        if r["status"] != "ok":   # the reason goes under the table: a long cell would squeeze the numbers
            t.add_row(name, "-", "-", "-", "", "-", "-", "-", "-", f"[yellow]{r['status']}[/]")
            notes.append(escape(f"{name} {r['status']}: {r.get('error', '')}"))   # `[bench]` is no markup
            continue
        mark = _target_cell(r) if r.get("targets") else ""
        gbs = f"{r['implied_bytes_per_s'] / 1e9:.2f}" if "implied_bytes_per_s" in r else "-"
        cpu = f"{r['cpu_ms_per_image']:.2f}" if "cpu_ms_per_image" in r else "-"
        t.add_row(name, f"{r['images_per_s']:,.0f}", _x(r["ratio_vs_pil"]), _x(r["ratio_vs_dali"]), mark, cpu,
                  _x(r.get("cpu_efficiency_vs_pil")), _x(r.get("cpu_efficiency_vs_dali")), gbs,
                  " ".join(f"{v:.0f}" for v in r["rounds"]))
    if notes:
        t.caption = (t.caption or "") + "\n" + "\n".join(notes)
    tables = [t]
    prof = result.get("profile")
    if prof and "stages_us" in prof:
        p = Table(title=f"JPEG worker, CPU us per image (1 core, {prof['samples']} samples, crop area {prof['mean_crop_area_fraction']:.0%})")
        p.add_column("stage")
        p.add_column("us/img", justify="right")
        for k, v in prof["stages_us"].items():
            p.add_row(k, f"{v:.0f}")
        p.add_row("[bold]worker total[/]", f"{prof['worker_us']:.0f}")
        tables.append(p)
    ts = result.get("train_step")
    if ts and ts["results"]:
        s = Table(title=f"training step on {ts['device']}: {ts['model']}")
        for col in ("pipeline", "ms/step", "data wait ms", "data share", "step time cut"):
            s.add_column(col, justify="right" if col != "pipeline" else "left")
        for name, r in ts["results"].items():
            cut = f"{100 * r['step_time_cut']:.0f}%" if "step_time_cut" in r else "-"
            s.add_row(name, f"{r['step_ms']:.1f}", f"{r['data_wait_ms']:.1f}", f"{100 * r['data_share']:.0f}%", cut)
        tables.append(s)
    return tables


def render_png(result: dict[str, Any], path: str | os.PathLike) -> None:
    """Bar chart of images/s per pipeline, labelled with the ratio vs PIL (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = {n: r for n, r in result["results"].items() if r["status"] == "ok"}
    names = list(ok)
    vals = [ok[n]["images_per_s"] for n in names]
    colors = ["#999999" if ok[n]["kind"] == "baseline" else "#2b7bba" for n in names]
    fig, ax = plt.subplots(figsize=(8, 3.8), dpi=120)
    bars = ax.bar(names, vals, color=colors)
    for b, n in zip(bars, names):
        lab = _x(ok[n]["ratio_vs_pil"]) + (f"\n{_x(ok[n]['ratio_vs_dali'])} DALI" if ok[n]["ratio_vs_dali"] else "")
        ax.annotate(lab, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8)
    cfg = result["config"]
    ax.set_ylabel("images / s")
    ax.set_title(f"input pipeline, {cfg['workers']} workers, batch {cfg['batch_size']}, {cfg['size']}px photos "
                 f"(load {result['machine']['load_avg_before'][0]:.1f})", fontsize=9)
    ax.margins(y=0.2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    _child_main()
