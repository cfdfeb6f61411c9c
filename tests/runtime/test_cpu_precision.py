"""The CPU precision policy: bf16 autocast only where the processor runs it natively (facts injected).

tests/conftest.py pins TORCHPORT_CPU_BF16/FP16=none for the rest of the suite; here the variables are
removed and the facts the policy reads (cpuinfo flags, torch's capability, oneDNN's bf16 path, the timed
probe) are replaced one by one, so each rule of :func:`torchport.backends.cpu_precision.decide` is seen to
decide -- and the real probe is run once, briefly.
"""

from __future__ import annotations

import json
import threading

import pytest
import torch

from torchport import backends
from torchport.backends import cpu_precision as cp
from torchport.errors import ConfigError

AVX2 = frozenset("fpu sse sse2 avx avx2 fma f16c".split())
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
ZEN5 = AVX512 | {"avx512_bf16"}
SPR = AVX512 | {"avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16"}


@pytest.fixture
def facts(monkeypatch, tmp_path):
    """Set the machine: ``facts(flags, capability="AVX512", mkldnn_bf16=True, arch="x86")``; probes counted."""
    for var in (*cp.ENV.values(), *cp.ISA_ENVS):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path / "cache"))
    probes: list[str] = []

    def set_facts(flags, capability="AVX512", mkldnn_bf16=True, arch="x86", ratio=3.0):
        monkeypatch.setattr(cp, "_cpuinfo", lambda: ("Test CPU", frozenset(flags)))
        monkeypatch.setattr(cp, "_arch", lambda: arch)
        monkeypatch.setattr(cp, "_torch_facts", lambda: {"capability": capability, "torch": "2.x", "threads": 2,
                                                         "mkldnn": {"bf16": mkldnn_bf16, "fp16": mkldnn_bf16}})

        def fake_probe(precision, reps=5):
            probes.append(precision)
            return cp.Cost(precision=precision, fp32_ms=10.0, low_ms=10.0 * ratio, reps=reps, threads=2,
                           measured="2026-01-01T00:00:00+00:00")
        monkeypatch.setattr(cp, "_time_probe", fake_probe)
        cp.reset()
        return probes

    yield set_facts
    cp.reset()


def test_avx2_cpu_is_not_native_from_its_flags_without_a_probe(facts):
    probes = facts(AVX2, capability="AVX2", mkldnn_bf16=False)
    d = cp.decide("bf16")
    assert (d.native, d.source) == (False, "flags") and "AVX2 CPU without AVX512-BF16" in d.reason
    assert probes == []
    assert backends.get("cpu").amp.resolve_auto() == "fp32"


@pytest.mark.parametrize("flags", [ZEN5, SPR], ids=["avx512_bf16", "amx"])
def test_native_bf16_flags_pick_bf16(facts, flags):
    probes = facts(flags)
    d = cp.decide("bf16")
    assert (d.native, d.source) == (True, "flags") and "avx512_bf16" in d.reason and probes == []
    policy = backends.get("cpu").amp
    assert policy.resolve_auto() == "bf16" and policy.substitute("bf16") == "bf16"
    # run's redirected CUDA fp16 autocast: fp16 where that is native too (AMX-FP16), else bf16
    assert policy.substitute("fp16") == ("fp16" if "avx512_fp16" in flags else "bf16")
    assert policy.resolve("bf16", "cpu") == ("bf16", None)   # native: no warning


@pytest.mark.parametrize("env, value", [("ATEN_CPU_CAPABILITY", "avx2"), ("ONEDNN_MAX_CPU_ISA", "AVX2"),
                                        ("DNNL_MAX_CPU_ISA", "AVX512_CORE")])
def test_an_isa_cap_makes_a_bf16_cpu_an_avx2_one(facts, monkeypatch, env, value):
    # ATEN_CPU_CAPABILITY changes what torch reports; the oneDNN caps are read from the environment
    facts(ZEN5, capability="AVX2" if env == "ATEN_CPU_CAPABILITY" else "AVX512")
    monkeypatch.setenv(env, value)
    d = cp.decide("bf16")
    assert (d.native, d.source) == (False, "torch"), d
    assert (value in d.reason) or ("AVX2 kernels" in d.reason)


def test_a_permissive_onednn_cap_keeps_native(facts, monkeypatch):
    facts(SPR)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_amx")
    assert cp.decide("bf16").native is True


def test_no_onednn_bf16_path_is_not_native(facts):
    facts(ZEN5, mkldnn_bf16=False)
    d = cp.decide("bf16")
    assert not d.native and "_is_mkldnn_bf16_supported" in d.reason


@pytest.mark.parametrize("ratio, native", [(0.7, True), (3.0, False)])
def test_inconclusive_flags_are_settled_by_the_probe_and_cached_on_disk(facts, tmp_path, ratio, native):
    probes = facts(AVX512, ratio=ratio)   # AVX-512 without a bf16 flag: oneDNN emulates bf16
    d = cp.decide("bf16")
    assert (d.native, d.source, probes) == (native, "probe", ["bf16"])
    assert d.probe.ratio == pytest.approx(ratio) and "timed probe" in d.reason
    data = json.loads((tmp_path / "cache" / "cpu-precision.json").read_text())
    assert data["schema"] == "torchport.cpu-precision/1" and len(data["entries"]) == 1
    cp.reset()                              # a new process: the decision is read back, not re-measured
    again = cp.decide("bf16")
    assert again.native is native and again.probe.cached and probes == ["bf16"]


def test_unreadable_flags_are_probed(facts):
    probes = facts(frozenset(), ratio=2.0)
    assert cp.decide("bf16").native is False and probes == ["bf16"]


@pytest.mark.parametrize("flags, native", [({"fp", "asimd", "bf16"}, True), ({"fp", "asimd"}, False)])
def test_arm_bf16_feature(facts, flags, native):
    facts(flags, capability="DEFAULT", arch="arm")
    assert cp.decide("bf16").native is native


def test_env_override_and_a_bad_value(facts, monkeypatch):
    probes = facts(AVX2, capability="AVX2", mkldnn_bf16=False)
    monkeypatch.setenv("TORCHPORT_CPU_BF16", "native")
    assert cp.decide("bf16").native and backends.get("cpu").amp.resolve_auto() == "bf16"
    monkeypatch.setenv("TORCHPORT_CPU_BF16", "probe")
    assert cp.decide("bf16").source == "probe" and probes == ["bf16"]
    monkeypatch.setenv("TORCHPORT_CPU_BF16", "fast")
    with pytest.raises(ConfigError, match=r"TORCHPORT_CPU_BF16='fast' is not one of native, none, probe, auto"):
        cp.decide("bf16")


def test_explicit_slow_precision_runs_as_asked_with_its_measured_cost(facts):
    facts(AVX2, capability="AVX2", mkldnn_bf16=False, ratio=9.5)
    policy = backends.get("cpu").amp
    for asked in ("bf16", "amp"):
        run, note = policy.resolve(asked, "cpu")
        assert run == "bf16"
        assert "runs as asked on cpu" in note and "9.5x slower than fp32" in note and "picks fp32" in note
    run, note = policy.resolve("fp16", "cpu")
    assert run == "fp16" and "no native fp16" in note


def test_concurrent_cache_writers_keep_every_entry(facts, tmp_path):
    facts(AVX512)
    path = cp.cache_path()
    costs = [cp.Cost(precision="bf16", fp32_ms=1.0, low_ms=float(i), reps=1, threads=1, measured="t") for i in range(8)]
    threads = [threading.Thread(target=cp._store, args=(path, f"k{i}", c)) for i, c in enumerate(costs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(json.loads(path.read_text())["entries"]) == [f"k{i}" for i in range(8)]


def test_the_real_probe_times_both_and_leaves_the_random_streams_alone():
    state = torch.get_rng_state()
    cost = cp._time_probe("bf16", reps=1)
    assert torch.equal(state, torch.get_rng_state())
    assert cost.fp32_ms > 0 and cost.low_ms > 0 and cost.threads == torch.get_num_threads()
    assert not torch.is_autocast_enabled("cpu")


def test_the_probe_is_invisible_to_the_users_instrumentation(monkeypatch):
    """The probe runs mid-script (the first explicit request under `run`): a global module hook or a patched
    `Tensor.backward` -- a profiler, a logger, the equivalence harness's probe -- must not see its model."""
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: seen.append(type(m).__name__))
    orig = torch.Tensor.backward
    monkeypatch.setattr(torch.Tensor, "backward", lambda self, *a, **k: (seen.append("backward"), orig(self, *a, **k)))
    try:
        cp._time_probe("bf16", reps=1)
        torch.nn.Linear(2, 1)(torch.ones(1, 2)).sum().backward()   # the instrumentation itself works
    finally:
        handle.remove()
    assert seen == ["Linear", "backward"]
