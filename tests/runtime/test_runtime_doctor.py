import json
import subprocess
import sys

from torchport.backends.npu import diagnose_ascend

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
ALL_DEPS = {"attrs", "cloudpickle", "decorator", "ml_dtypes", "psutil", "scipy", "tornado", "torch_npu"}


def ids(problems):
    return {p["id"] for p in problems}


def good_env():
    return {
        "ASCEND_TOOLKIT_HOME": TOOLKIT,
        "ASCEND_OPP_PATH": f"{TOOLKIT}/opp",
        "LD_LIBRARY_PATH": f"{TOOLKIT}/lib64:{TOOLKIT}/runtime/lib64",
        "PYTHONPATH": f"{TOOLKIT}/python/site-packages:{TOOLKIT}/opp/built-in/op_impl/ai_core/tbe",
        "VIRTUAL_ENV": "/home/u/venv",
    }


def good_path():
    return ["", "/home/u/venv/lib/python3.10/site-packages", f"{TOOLKIT}/python/site-packages"]


def test_healthy_ascend_env_has_no_problems():
    assert diagnose_ascend(good_env(), good_path(), lambda m: m in ALL_DEPS) == []


def test_not_an_ascend_host_reports_nothing():
    assert diagnose_ascend({"PATH": "/usr/bin"}, ["/usr/lib/python3"], lambda m: False) == []


def test_cann_not_sourced():
    probs = diagnose_ascend({"ASCEND_RT_VISIBLE_DEVICES": "0"}, good_path(), lambda m: m in ALL_DEPS)
    assert "cann-not-sourced" in ids(probs)
    assert any("set_env.sh" in p["fix"] for p in probs)


def test_cann_sourced_after_venv_detected_from_path_order():
    path = ["", f"{TOOLKIT}/python/site-packages", "/home/u/venv/lib/python3.10/site-packages"]
    probs = diagnose_ascend(good_env(), path, lambda m: m in ALL_DEPS)
    assert ids(probs) == {"cann-sourced-after-venv"}
    fix = next(p["fix"] for p in probs)
    assert "set_env.sh" in fix and "activate" in fix


def test_missing_tbe_deps_named_with_pip_command():
    present = ALL_DEPS - {"decorator", "ml_dtypes"}
    probs = diagnose_ascend(good_env(), good_path(), lambda m: m in present)
    (p,) = [p for p in probs if p["id"] == "tbe-deps-missing"]
    assert "decorator" in p["problem"] and "ml_dtypes" in p["problem"]
    assert p["fix"] == "pip install decorator ml-dtypes"


def test_missing_library_path_and_opp():
    env = good_env()
    env["LD_LIBRARY_PATH"] = "/usr/lib"
    del env["ASCEND_OPP_PATH"]
    assert {"cann-libs-missing", "opp-path-missing"} <= ids(diagnose_ascend(env, good_path(), lambda m: m in ALL_DEPS))


def test_hccl_hint_for_multiprocess():
    env = {**good_env(), "WORLD_SIZE": "16"}
    assert "hccl-timeout-default" in ids(diagnose_ascend(env, good_path(), lambda m: m in ALL_DEPS))


def test_torch_npu_missing_on_cann_host():
    probs = diagnose_ascend(good_env(), good_path(), lambda m: m in ALL_DEPS - {"torch_npu"})
    assert "torch-npu-missing" in ids(probs)


def _doctor(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "torchport", "doctor", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_doctor_cli_json_and_strict(tmp_path):
    out = _doctor("--json", str(tmp_path / "d.json"))
    assert out.returncode == 0, out.stderr
    rep = json.loads((tmp_path / "d.json").read_text())
    assert [b["name"] for b in rep["backends"]][:5] == ["npu", "cuda", "xpu", "mps", "cpu"]
    assert rep["selected"]["device"] == "cpu" and rep["versions"]["torch"]
    assert "copy into bug reports" in out.stdout
    # a broken Ascend environment: --strict exits non-zero and names the fix
    bad = _doctor("--strict", env={"ASCEND_TOOLKIT_HOME": "/nonexistent/Ascend", "PYTHONPATH": ""})
    assert bad.returncode == 1
    assert "set_env.sh" in bad.stdout
