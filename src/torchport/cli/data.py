"""``torchport data``: make, pack, inspect and verify datasets for the fast input pipeline.

Sub-commands::

    torchport data synth DST --num-classes 10 --per-class 300 --image-size 72   # learnable toy set (JPEG ImageFolder)
    torchport data photos DST --count 1000                              # realistic benchmark JPEGs
    torchport data pack SRC DST --mode predecoded --resize-short-side 256   # ImageFolder -> shards
    torchport data inspect DST [--json FILE]                            # what is in a shard directory
    torchport data verify DST [--json FILE]                             # checksums + every sample; exit 1 on damage
    torchport data bench [--root DIR]                                   # input pipeline vs the PIL baseline

Exit codes (:class:`torchport.errors.ExitCode`, docs/cli.md): 0 ok, 1 verification failed / nothing
packed, 2 bad option or existing destination, 3 unreadable source data, 6 unwritable destination.
"""

from __future__ import annotations

from pathlib import Path

import typer

from torchport.cli._options import MARKUP, alias, json_option, renamed, write_json

_app = typer.Typer(
    name="data",
    help="Make, pack, inspect and verify datasets for torchport's fast input pipeline; benchmark it against PIL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=MARKUP,
)


def register(app: typer.Typer) -> None:
    """Attach the ``data`` sub-app to the torchport app."""
    from torchport.cli.data_bench import register_bench_data

    register_bench_data(_app, "bench")
    app.add_typer(_app, name="data")


def _console(json_out=None):
    """The terminal; stderr when ``--json -`` puts the machine-readable result on stdout (no hard wrap
    when it is not a terminal)."""
    from torchport.log import console

    return console(stderr=json_out is not None and str(json_out) == "-")


def _fail(msg: str, code: int = 2) -> None:
    """One error line (``torchport data VERB: error: ...``, the sub-verb running) and an exit code of
    :class:`torchport.errors.ExitCode`."""
    from torchport.cli._common import current_verb, fail

    fail(current_verb("data"), msg, code)


def _progress(description: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from torchport.log import console

    # on stderr: stdout may carry `--json -`
    return Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=False,
                    console=console(stderr=True))


@_app.command("synth")
def synth(
    dst: Path = typer.Argument(..., help="output directory (train/ and val/ ImageFolders)"),
    num_classes: int = typer.Option(10, "--num-classes", help="number of shape/texture classes (1-10)"),
    per_class: int = typer.Option(300, "--per-class", help="training images per class"),
    val_per_class: int = typer.Option(None, "--val-per-class", help="validation images per class (default per-class/5)"),
    image_size: int = typer.Option(72, "--image-size", help="image side in pixels"),
    quality: int = typer.Option(90, help="JPEG quality"),
    seed: int = typer.Option(0),
    classes: int = alias("--classes"),
    size: int = alias("--size"),
) -> None:
    """Generate the synthetic shapes/textures dataset (real JPEG files, ImageFolder layout)."""
    from torchport.data.synth import make_dataset

    classes = renamed("data synth", "--num-classes", num_classes, "--classes", classes, default=10)
    size = renamed("data synth", "--image-size", image_size, "--size", size, default=72)
    try:
        m = make_dataset(dst, classes=classes, train_per_class=per_class,
                         val_per_class=val_per_class if val_per_class is not None else max(1, per_class // 5),
                         size=size, quality=quality, seed=seed)
    except ValueError as e:
        _fail(str(e))
    _console().print(f"wrote {len(m['classes'])} classes x ({m['train_per_class']} train + {m['val_per_class']} val) "
                     f"{m['size']}px JPEGs to {dst}")


@_app.command("photos")
def photos(
    dst: Path = typer.Argument(..., help="output ImageFolder"),
    count: int = typer.Option(1000, help="number of images"),
    quality: int = typer.Option(90, help="JPEG quality"),
    seed: int = typer.Option(0),
) -> None:
    """Build ImageNet-like photo JPEGs (~500x375, q90) from scikit-image's bundled photographs."""
    from torchport.data.photos import make_photos

    try:
        with _progress("photos") as bar:
            task = bar.add_task("photos", total=count)
            m = make_photos(dst, count=count, quality=quality, seed=seed, progress=lambda d, t: bar.update(task, completed=d))
    except (ImportError, RuntimeError) as e:
        _fail(str(e))
    _console().print(f"wrote {m['count']} photos in {len(m['classes'])} classes (mean {m['mean_bytes'] // 1024} KiB) to {dst}")


@_app.command("pack")
def pack_cmd(
    src: Path = typer.Argument(..., help="ImageFolder (SRC/<class>/<image>) or a directory with train/ and val/"),
    dst: str = typer.Argument(..., help="output shard directory, or an s3:// / obs:// URL (uploaded, manifest last)"),
    mode: str = typer.Option("jpeg", help="predecoded (uint8 pixels) or jpeg (encoded bytes)"),
    resize_short_side: int = typer.Option(256, "--resize-short-side", help="predecoded: shorter side after resizing"),
    max_size: int = typer.Option(None, "--max-size", help="jpeg: re-encode images whose longer side exceeds this"),
    quality: int = typer.Option(90, help="JPEG quality when re-encoding"),
    shard_mb: int = typer.Option(256, "--shard-mb", help="target shard size in MiB"),
    workers: int = typer.Option(None, help="decoding processes (default: all CPUs)"),
    overwrite: bool = typer.Option(False, help="replace an existing DST"),
    restart_markers: bool = typer.Option(True, "--restart-markers/--no-restart-markers",
                                         help="jpeg: rewrite JPEGs losslessly with restart markers (same pixels; random "
                                              "crops decode ~25% faster); --no-restart-markers keeps the files' bytes"),
    json_out: Path = json_option("the pack report(s)"),
    size: int = alias("--size"),
) -> None:
    """Pack an ImageFolder into shards with an index, per-shard sha256, label map and pack report."""
    size = renamed("data pack", "--resize-short-side", resize_short_side, "--size", size, default=256)
    from torchport.data.errors import SourceError
    from torchport.data.pack import PackConfig, pack, split_dirs
    from torchport.errors import StorageError

    try:
        cfg = PackConfig(mode=mode, size=size, max_size=max_size, quality=quality, shard_bytes=shard_mb << 20, workers=workers,
                         restart_markers=restart_markers)
    except ValueError as e:
        _fail(str(e))
    from torchport.paths import resolve
    from torchport.storage import fs

    resolve(src, option="SRC")                       # local only: a URL here is one line, not a folder 's3:'
    dst = resolve(dst, option="DST", remote=True)
    try:               # a missing bucket / denied / unreachable store is found before packing, not after
        fs.check_reachable(dst)
    except StorageError as e:
        _fail(str(e), int(StorageError.exit_code))
    splits = split_dirs(src) if src.is_dir() else []
    jobs = [(src / s, _join(dst, s), s) for s in splits] or [(src, dst, "")]
    reports = {}
    console = _console(json_out)
    for s_src, s_dst, name in jobs:
        try:
            with _progress(f"pack {name or src.name} ({mode})") as bar:
                task = bar.add_task("pack", total=None)
                rep = pack(s_src, s_dst, config=cfg, overwrite=overwrite,
                           progress=lambda d, t: bar.update(task, completed=d, total=t))
        except SourceError as e:         # the source folder is missing or unreadable: bad input data (3)
            _fail(str(e), int(e.exit_code))
        except FileExistsError as e:
            _fail(str(e))
        except StorageError as e:
            _fail(str(e), int(StorageError.exit_code))
        except OSError as e:       # an unwritable / missing destination: one line, exit IO (6)
            from torchport.cli._common import fail
            from torchport.errors import ExitCode

            fail("data pack", f"cannot write {str(s_dst)!r}: {e.strerror or e} ({e.filename or s_dst}); "
                 "choose a writable destination", ExitCode.IO)
        reports[name or "all"] = rep
        console.print(f"{name or 'packed'}: {rep['written']} written, {rep['skipped']} skipped, {rep['reencoded']} re-encoded, "
                      f"{rep['restart_markers']} with restart markers, "
                      f"{rep['shards']} shard(s), {rep['bytes'] / 2**20:.1f} MiB in {rep['seconds']:.1f}s -> {s_dst}")
        for item in rep["skipped_files"][:10]:
            console.print(f"  [yellow]skipped[/] {_name(item['path'])}: {_name(item['reason'])}")
        if rep["skipped"] > 10:
            console.print(f"  ... and {rep['skipped'] - 10} more (see {s_dst}/pack_report.json)")
    write_json(json_out, reports)
    if not any(r["written"] for r in reports.values()):
        raise typer.Exit(1)


def _name(value) -> str:
    """A name read from a data set or its manifest (class folder, file, shard), shown on the terminal as text:
    escape sequences, newlines and rich markup made visible (:func:`torchport._escape.terminal_name`)."""
    from torchport._escape import terminal_name

    return terminal_name(value)


def _join(base, name: str):
    """``base / name`` for a directory, ``base + "/" + name`` for an s3:// / obs:// URL."""
    from torchport.storage import fs

    return fs.join(base, name)


def _shard_dirs(path) -> list[tuple[str, object]]:
    from torchport.data.format import is_shard_dir
    from torchport.errors import ConfigError, StorageError
    from torchport.paths import resolve

    try:
        path = resolve(path, option="PATH", remote=True)     # a shard directory or an s3:// / obs:// URL
    except ConfigError as e:
        _fail(str(e))
    try:
        if is_shard_dir(path):
            return [("", path)]
        found = [(s, _join(path, s)) for s in ("train", "val", "test") if is_shard_dir(_join(path, s))]
    except StorageError as e:
        _fail(str(e), int(StorageError.exit_code))
    if not found:
        _fail(f"{path} is not a torchport shard directory (no index.json); create one with `torchport data pack SRC DST`")
    return found


@_app.command("inspect")
def inspect_cmd(
    path: str = typer.Argument(..., help="shard directory or s3:// / obs:// URL (or one with train/ and val/ shard sets)"),
    json_out: Path = json_option("the summary"),
) -> None:
    """Summarise a shard directory: mode, samples, classes, shards, sizes."""
    import numpy as np
    from rich.table import Table

    from torchport.data.errors import DataError
    from torchport.data.format import ShardSet
    from torchport.errors import StorageError

    out = {}
    console = _console(json_out)
    for name, d in _shard_dirs(path):
        try:
            s = ShardSet.open(d, verify="quick")
        except DataError as e:
            _fail(str(e), 1)
        except StorageError as e:
            _fail(str(e), int(StorageError.exit_code))
        counts = np.bincount(s.labels, minlength=len(s.classes))
        info = {
            "path": str(d), "mode": s.mode, "samples": len(s), "classes": len(s.classes), "shards": len(s.manifest["shards"]),
            "bytes": s.total_bytes, "size": s.manifest.get("size"), "max_size": s.manifest.get("max_size"),
            "height": [int(s.heights.min()), int(s.heights.max())] if len(s) else None,
            "width": [int(s.widths.min()), int(s.widths.max())] if len(s) else None,
            "per_class": dict(zip(s.classes, map(int, counts))),
        }
        out[name or "all"] = info
        t = Table(title=f"{_name(d)} ({_name(s.mode)})")
        t.add_column("field")
        t.add_column("value")
        for k in ("samples", "classes", "shards", "bytes", "size", "height", "width"):
            t.add_row(k, str(info[k]))
        t.add_row("per class", ", ".join(f"{_name(k)}:{v}" for k, v in list(info["per_class"].items())[:12]))
        console.print(t)
    write_json(json_out, out)


@_app.command("verify")
def verify_cmd(
    path: str = typer.Argument(..., help="shard directory or s3:// / obs:// URL (or one with train/ and val/ shard sets)"),
    samples: bool = typer.Option(True, "--samples/--no-samples", help="also check every sample's crc32"),
    json_out: Path = json_option("the result"),
) -> None:
    """Check index + shard sha256 (and every sample's crc32); exit 1 naming each damaged shard/offset."""
    from torchport.data.errors import DataError
    from torchport.data.format import ShardSet
    from torchport.errors import StorageError

    out = {}
    ok_all = True
    console = _console(json_out)
    for name, d in _shard_dirs(path):
        try:
            s = ShardSet.open(d, verify="none")
            res = s.verify(full=True, samples=samples)
            # the index checksum is checked by opening with verification
            ShardSet.open(d, verify="quick")
            problems, checked = res.problems, res.checked
        except DataError as e:
            problems, checked = [str(e)], ["manifest", "index sha256"]
        except StorageError as e:
            _fail(str(e), int(StorageError.exit_code))
        ok = not problems
        ok_all &= ok
        out[name or "all"] = {"path": str(d), "ok": ok, "checked": checked, "problems": problems}
        console.print(f"{'[green]ok[/]' if ok else '[red]FAILED[/]'} {_name(d)} (checked: {', '.join(checked)})")
        for p in problems[:20]:
            console.print(f"  [red]-[/] {_name(p)}")
    write_json(json_out, out)
    if not ok_all:
        raise typer.Exit(1)
