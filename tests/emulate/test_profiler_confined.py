"""The emulated ``torch_npu.profiler.analyse`` reads and writes only inside the result folder it is given
(issue 36): a symlinked output folder, trace or ``*_ascend_pt`` folder leading elsewhere is refused in one line."""

from __future__ import annotations

import json

import pytest

import torchport.emulate as emulate

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture
def npu():
    with emulate.emulated(devices=1) as mod:
        yield mod


def analyse(path):
    import torch_npu

    return torch_npu.profiler.profiler.analyse(path)

TRACE = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "args": {}}]}


def _result(root, name="w_1_ascend_pt"):
    d = root / name
    d.mkdir(parents=True)
    (d / "w.pt.trace.json").write_text(json.dumps(TRACE))
    return d


def test_analyse_writes_inside_the_folder(tmp_path, npu):
    d = _result(tmp_path / "prof")
    analyse(str(tmp_path / "prof"))
    assert (d / OUTPUT_DIR / "trace_view.json").is_file()


def test_symlinked_output_folder_is_refused(tmp_path, npu):
    d = _result(tmp_path / "prof")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (d / OUTPUT_DIR).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RuntimeError) as exc:
        analyse(str(tmp_path / "prof"))
    assert list(elsewhere.iterdir()) == [], "analyse wrote through the symlinked output folder"
    assert "symlink" in str(exc.value) and "\n" not in str(exc.value)


def test_result_folder_linked_in_from_elsewhere_is_refused(tmp_path, npu):
    outside = _result(tmp_path / "outside")
    (tmp_path / "prof").mkdir()
    (tmp_path / "prof" / "x_ascend_pt").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RuntimeError, match="outside the result folder"):
        analyse(str(tmp_path / "prof"))
    assert not (outside / OUTPUT_DIR).exists()


def test_symlinked_trace_is_refused(tmp_path, npu):
    d = tmp_path / "prof" / "w_ascend_pt"
    d.mkdir(parents=True)
    secret = tmp_path / "secret.pt.trace.json"
    secret.write_text(json.dumps(TRACE))
    (d / "w.pt.trace.json").symlink_to(secret)
    with pytest.raises(RuntimeError, match="symlink"):
        analyse(str(tmp_path / "prof"))
