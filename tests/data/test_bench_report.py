"""`torchport data bench` claims only what it measured, and compares against DALI's fastest CPU path.

* a target whose baseline did not run is "not measured" -- never "ok", never ``meets_target: true``;
* the table keeps its numeric columns when a baseline is skipped (the reason goes under the table);
* the DALI baseline decodes only the random crop's window (``fn.decoders.image_random_crop``), as
  DALI's own ResNet-50 pipeline does -- checked against a recording stand-in for ``nvidia.dali``;
* without scikit-image (its generated photo set) the verb says in one line what to install.
"""

from __future__ import annotations

import io
import sys
import types

import typer
from typer.testing import CliRunner

from torchport.cli.data_bench import register_bench_data
from torchport.data import bench, bench_baselines


def _result(dali: bool) -> dict:
    jpeg = {"label": "torchport jpeg shards", "kind": "torchport", "status": "ok", "images_per_s": 2953.0,
            "rounds": [2953.0], "ratio_vs_pil": 4.53, "ratio_vs_dali": 3.0 if dali else None,
            "cpu_ms_per_image": 0.66}
    jpeg["targets"] = bench.TARGETS["jpeg"]
    jpeg["target_verdicts"], jpeg["meets_target"] = bench.target_verdicts(jpeg, bench.TARGETS["jpeg"])
    results = {"pil": {"label": "PIL", "kind": "baseline", "status": "ok", "images_per_s": 653.0, "rounds": [653.0],
                       "ratio_vs_pil": 1.0, "ratio_vs_dali": 0.66 if dali else None},
               "jpeg": jpeg}
    if not dali:
        results["dali"] = {"label": "DALI", "kind": "baseline", "status": "skipped",
                           "error": "dali: `nvidia.dali` is not installed (pip install 'torchport[bench]' "
                                    "(nvidia-dali-cuda120)); skipped"}
    return {"config": {"workers": 2, "batch_size": 64, "size": 224, "rounds": 1},
            "machine": {"copy_bandwidth_bytes_per_s": 1.1e10, "load_avg_before": [1.0], "load_avg_after": [1.0],
                        "cpus": 2},
            "jpeg_decoder": "libjpeg-turbo", "results": results}


def test_no_verdict_for_a_comparison_not_run():
    verdicts, meets = bench.target_verdicts({"ratio_vs_pil": 4.5, "ratio_vs_dali": None}, bench.TARGETS["jpeg"])
    assert verdicts == {"vs_pil": True, "vs_dali": None} and meets is None
    assert bench.target_verdicts({"ratio_vs_pil": 3.0, "ratio_vs_dali": None}, bench.TARGETS["jpeg"])[1] is False
    assert bench.target_verdicts({"ratio_vs_pil": 4.0, "ratio_vs_dali": 2.5}, bench.TARGETS["jpeg"])[1] is True


def _render(result) -> str:
    from torchport.log import console

    buf = io.StringIO()
    con = console(file=buf)
    for table in bench.render_table(result):
        con.print(table)
    return buf.getvalue()


def test_table_says_not_measured_and_keeps_its_numbers():
    text = _render(_result(dali=False))
    jpeg = next(ln for ln in text.splitlines() if ln.strip("│ ").startswith("jpeg "))
    assert "3.5x/pil ok 2x/dali not measured" in jpeg
    assert "2,953" in jpeg and "4.53x" in jpeg and "0.66" in jpeg      # the numeric columns are whole
    assert "dali skipped: dali: `nvidia.dali` is not installed (pip install 'torchport[bench]'" in text
    measured = _render(_result(dali=True))
    assert "3.5x/pil ok 2x/dali ok" in measured


class _Node:
    def __init__(self, name):
        self.name = name


def _fake_dali(calls: list):
    """A stand-in for ``nvidia.dali`` that records which operators a pipeline definition uses."""
    def op(name):
        def call(*a, **k):
            calls.append(name)
            return (_Node(name), _Node(name)) if name == "readers.file" else _Node(name)   # (jpegs, labels)
        return call

    class _Ns:
        def __init__(self, prefix):
            self._prefix = prefix

        def __getattr__(self, name):
            if name in ("decoders", "readers", "random", "experimental"):
                return _Ns(f"{self._prefix}{name}.")
            return op(self._prefix + name)

    class _Pipe:
        def __init__(self, body):
            self._body = body

        def build(self):
            self._body()

    dali = types.ModuleType("nvidia.dali")
    dali.fn = _Ns("")
    dali.types = types.SimpleNamespace(RGB="RGB", FLOAT="FLOAT")
    dali.pipeline_def = lambda **kw: (lambda body: (lambda: _Pipe(body)))
    plugin = types.ModuleType("nvidia.dali.plugin")
    pytorch = types.ModuleType("nvidia.dali.plugin.pytorch")
    pytorch.DALIGenericIterator = lambda *a, **k: iter(())
    pytorch.LastBatchPolicy = types.SimpleNamespace(DROP="DROP")
    return {"nvidia": types.ModuleType("nvidia"), "nvidia.dali": dali, "nvidia.dali.plugin": plugin,
            "nvidia.dali.plugin.pytorch": pytorch}


def test_dali_baseline_is_the_fused_roi_decode(monkeypatch, tmp_path):
    calls: list = []
    for name, module in _fake_dali(calls).items():
        monkeypatch.setitem(sys.modules, name, module)
    bench_baselines.build_baseline("dali", tmp_path, batch_size=4, workers=2, image_size=32)
    assert "decoders.image_random_crop" in calls, calls
    assert "decoders.image" not in calls and "random_resized_crop" not in calls   # the slower unfused path
    assert calls.index("decoders.image_random_crop") < calls.index("resize") < calls.index("crop_mirror_normalize")


def test_without_scikit_image_one_line_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "skimage", None)        # import skimage -> ImportError
    monkeypatch.setitem(sys.modules, "skimage.data", None)
    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        pass

    register_bench_data(app)
    res = CliRunner().invoke(app, ["data", "--no-train-step", "--no-profile", "--rounds", "1", "--count", "8"],
                             env={"TORCHPORT_CACHE": str(tmp_path / "cache")})
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'torchport[bench]'" in lines[0] and "--root" in lines[0]
