"""`torchport bench`: FP32 vs AMP on cpu (tiny preset), the seed table, JSON schema, compare."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from torchport.bench.report import compare, fmt_change, load, rows
from torchport.cli import bench as bench_cli


@pytest.fixture(scope="module")
def app():
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # keep "bench" a sub-command
        pass

    bench_cli.register(app)
    return app


def _seed_report(device="npu:0", fp32=(545.0, 117.4, 5651), amp=(1254.0, 50.6, 2924), **settings):
    """A report dict with the issue's Ascend 910B3 numbers (MiB)."""
    def res(prec, v):
        return {"precision": prec, "images_per_s": v[0], "ms_per_batch": v[1],
                "peak_memory_bytes": None if v[2] is None else int(v[2] * 2 ** 20), "spread_pct": 1.0}
    return {"device": device, "backend": device.split(":")[0], "device_name": "Ascend910B3",
            "settings": {"model": "resnet50", "batch": 64, "size": 224, **settings},
            "results": {"fp32": res("fp32", fp32), "amp": res("fp16", amp)},
            "comparison": {"speedup": amp[0] / fp32[0]}}


def test_seed_table_reproduces_the_issue_changes():
    header, body = rows(_seed_report())
    assert header == ["", "FP32", "AMP (fp16)", "change"]
    assert body[0] == ["throughput", "545 img/s", "1254 img/s", "+130% (2.30x)"]
    assert body[1] == ["peak memory", "5651 MiB", "2924 MiB", "-48%"]
    assert body[2] == ["time per batch", "117.4 ms", "50.6 ms", "-57%"]


def test_change_is_na_when_memory_is_unknown():
    assert fmt_change(None, 5) == "n/a" and fmt_change(5, None) == "n/a"
    _, body = rows(_seed_report(fp32=(10.0, 100.0, None), amp=(20.0, 50.0, None)))
    assert body[1] == ["peak memory", "n/a", "n/a", "n/a"]


def test_bench_tiny_preset_on_cpu_cli(app, tmp_path):
    out, png = tmp_path / "cpu.json", tmp_path / "cpu.png"
    r = CliRunner().invoke(app, ["bench", "--preset", "tiny", "--device", "cpu", "--json", str(out),
                                 "--png", str(png), "-q"])
    assert r.exit_code == 0, r.output
    for word in ("throughput", "peak memory", "time per batch", "FP32", "AMP (bf16)", "change"):
        assert word in r.output

    data = load(str(out))
    assert data["schema"] == "torchport.bench/1"
    assert data["device"] == "cpu" and data["backend"] == "cpu" and data["emulated"] is False
    assert data["torch"] and data["host"]
    s = data["settings"]
    assert (s["model"], s["batch"], s["size"], s["windows"], s["steps_per_window"]) == ("squeezenet1_1", 16, 64, 3, 2)
    assert list(data["results"]) == ["fp32", "amp"]
    assert data["results"]["amp"]["precision"] == "bf16"  # cpu: AMP means bf16 autocast (asked: it runs)
    # the policy and its reason, in the table's footer and the JSON (tests pin TORCHPORT_CPU_BF16=none)
    assert data["precision_policy"] == {"auto": "fp32", "reason": "bf16 not native: TORCHPORT_CPU_BF16=none"}
    assert "precision policy: auto = fp32 on cpu -- bf16 not native: TORCHPORT_CPU_BF16=none" in r.output
    for res in data["results"].values():
        assert res["images_per_s"] > 0 and res["ms_per_batch"] > 0
        assert res["images_per_s"] == pytest.approx(16 * 1000 / res["ms_per_batch"])
        assert len(res["windows_ms"]) == 3
        assert res["ms_per_batch"] == sorted(res["windows_ms"])[1]  # the median window
        assert res["peak_memory_bytes"] is None  # cpu has no device allocator: reported as n/a
    comp = data["comparison"]
    assert comp["speedup"] == pytest.approx(data["results"]["amp"]["images_per_s"] / data["results"]["fp32"]["images_per_s"])
    assert comp["memory_change"] is None
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_ratios(tmp_path):
    gpu = _seed_report("cuda:0", fp32=(1090.0, 58.7, 6000), amp=(2508.0, 25.5, 3000))
    npu = _seed_report("npu:0")
    cmp = compare(gpu, npu)
    by = {(r["precision"], r["metric"]): r for r in cmp["rows"]}
    assert by[("fp32", "images_per_s")]["ratio"] == pytest.approx(545 / 1090)
    assert by[("amp", "ms_per_batch")]["ratio"] == pytest.approx(50.6 / 25.5)
    assert by[("amp", "peak_memory_bytes")]["ratio"] == pytest.approx(2924 / 3000, rel=1e-3)
    assert cmp["settings_differ"] == []
    assert cmp["amp_speedup"]["b"] == pytest.approx(1254 / 545)
    assert compare(gpu, _seed_report(batch=32))["settings_differ"] == ["batch"]


def test_compare_cli(app, tmp_path):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "cmp.json"
    a.write_text(json.dumps(_seed_report("cuda:0", fp32=(1090.0, 58.7, 6000), amp=(2508.0, 25.5, 3000))))
    b.write_text(json.dumps(_seed_report("npu:0")))
    r = CliRunner().invoke(app, ["bench", "compare", str(a), str(b), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "0.50x" in r.output and "B / A" in r.output and "npu:0" in r.output
    assert json.loads(out.read_text())["schema"] == "torchport.bench.compare/1"


def test_compare_cli_rejects_non_reports(app, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    r = CliRunner().invoke(app, ["bench", "compare", str(bad), str(bad)])
    assert r.exit_code == 2 and "not a torchport bench report" in r.output


@pytest.mark.parametrize("args, message", [
    (["--precision", "fp32,int4"], "not one of"),
    (["--precision", "fp32,fp32"], "repeat"),
    (["--model", "no_such_net"], "unknown model"),
    (["--windows", "0"], "must be >= 1"),
])
def test_bench_bad_settings_exit_2(app, args, message):
    r = CliRunner().invoke(app, ["bench", "--preset", "tiny", "--device", "cpu", "--warmup", "0", "--windows", "1",
                                 "--steps-per-window", "1", "-q", *args])
    assert r.exit_code == 2
    assert message in r.output


def test_bench_data_subcommand_is_attached_when_present(app):
    import importlib.util

    assert importlib.util.find_spec("torchport.bench.data_bench") is not None
    r = CliRunner().invoke(app, ["bench", "data", "--help"])
    assert r.exit_code == 0, r.output


def _image_folder(root, per_class=4):
    from PIL import Image

    for cls, color in (("cat", (200, 30, 30)), ("dog", (30, 30, 200))):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (40, 36), tuple(c + 5 * i for c in color)).save(root / cls / f"{i}.jpg")
    return root


def test_bench_reads_an_image_folder(tmp_path):
    from torchport.bench.amp_bench import BenchConfig, run_bench
    from torchport.workload import Workload

    root = _image_folder(tmp_path / "imgs")
    wl = Workload(model="tinycnn", batch=4, size=32, num_classes=2, data=str(root), workers=0)
    report = run_bench(BenchConfig(workload=wl, precisions=("fp32",), windows=2, steps_per_window=3, warmup=1,
                                   device="cpu"))
    res = report.results["fp32"]
    assert res.images_per_s > 0 and len(res.windows_ms) == 2  # 8 images = 2 batches: the loader re-runs
    assert report.to_dict()["settings"]["data"] == str(root)
