"""Trace export picks the vendor profiler when the device module's package ships one, else torch.profiler."""

from __future__ import annotations

import sys
import types

import pytest

from torchport.profile.trace import chrome_trace, profiler_plan


@pytest.fixture
def fake_vendor(monkeypatch, tmp_path):
    """A vendor package (like torch_npu) whose ``profiler`` module records how it was driven."""
    calls = {}

    class ProfilerActivity:
        CPU = "cpu-activity"
        FAKE = "fake-activity"

    class Profile:
        def __init__(self, *, activities, record_shapes, on_trace_ready):
            calls["activities"] = activities
            calls["handler"] = on_trace_ready
            self.steps = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            calls["handler"](self)

        def step(self):
            self.steps += 1

    def tensorboard_trace_handler(out_dir):
        def write(prof):
            (tmp_path / "vendor_trace.json").write_text('{"steps": %d}' % prof.steps)
            calls["out_dir"] = out_dir
        return write

    pkg = types.ModuleType("fakevendor")
    pkg.__path__ = []  # a package
    prof_mod = types.ModuleType("fakevendor.profiler")
    prof_mod.profile = Profile
    prof_mod.ProfilerActivity = ProfilerActivity
    prof_mod.tensorboard_trace_handler = tensorboard_trace_handler
    prof_mod.__spec__ = types.SimpleNamespace(name="fakevendor.profiler")
    monkeypatch.setitem(sys.modules, "fakevendor", pkg)
    monkeypatch.setitem(sys.modules, "fakevendor.profiler", prof_mod)
    device_module = types.ModuleType("fakevendor.device")
    target = types.SimpleNamespace(type="fake", is_accelerator=True, module=device_module,
                                   backend=types.SimpleNamespace(emulated=False))
    return target, calls


def test_vendor_profiler_is_used_when_the_device_package_has_one(fake_vendor, tmp_path):
    target, calls = fake_vendor
    assert profiler_plan(target) == {"profiler": "fakevendor.profiler", "activities": ["CPU", "FAKE"]}
    with chrome_trace(str(tmp_path / "t"), target) as tracer:
        tracer.step()
        tracer.step()
    assert calls["activities"] == ["cpu-activity", "fake-activity"]
    assert calls["out_dir"] == str(tmp_path / "t")
    assert (tmp_path / "vendor_trace.json").read_text() == '{"steps": 2}'


def test_emulated_and_cpu_targets_use_torch_profiler():
    import torchport

    cpu = torchport.select_device("cpu")
    assert profiler_plan(cpu) == {"profiler": "torch.profiler", "activities": ["CPU"]}
