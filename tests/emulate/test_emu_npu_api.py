"""torch.npu on the emulator vs torch_npu 2.14.0's ``torch_npu.npu.__all__``, in both directions.

``data/torch_npu_2_14_0_npu_api.json`` holds the 144 names with their parameters and defaults,
extracted from the real wheel (test_emu_conformance.py re-checks the file against the wheel when
one is at hand). Every name is either provided with real behaviour, or listed in
``NOT_EMULATED`` with a reason (the same table is in docs/emulator.md) -- never both, never neither.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import torch

API = json.loads((Path(__file__).parent / "data" / "torch_npu_2_14_0_npu_api.json").read_text())["names"]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"


def _module():
    from torchport.emulate import _npu_module

    return _npu_module


def test_every_torch_npu_name_is_provided_or_listed_as_not_emulated(emulated_npu):
    mod = _module()
    neither = [n for n in API if not hasattr(torch.npu, n) and n not in mod.NOT_EMULATED]
    both = [n for n in API if hasattr(torch.npu, n) and n in mod.NOT_EMULATED]
    assert not neither, f"torch_npu.npu names neither emulated nor listed as not emulated: {neither}"
    assert not both, f"listed as not emulated but present: {both}"
    assert set(mod.NOT_EMULATED) <= set(API), "NOT_EMULATED names a function torch_npu does not have"
    assert set(mod.__all__) - {"amp"} <= set(API), "torch.npu.__all__ has names torch_npu.npu.__all__ lacks"
    assert len(API) == 144


def test_not_emulated_table_is_in_the_docs():
    text = DOCS.read_text()
    mod = _module()
    missing = [n for n in mod.NOT_EMULATED if not re.search(rf"`{re.escape(n)}`", text)]
    assert not missing, f"docs/emulator.md lacks these not-emulated names: {missing}"


def _default_text(p: inspect.Parameter):
    return None if p.default is inspect.Parameter.empty else repr(p.default)


def _provided_with_signature() -> list[str]:
    listed = _module().NOT_EMULATED
    return sorted(n for n, v in API.items() if v["kind"] in ("function", "class") and v["params"] is not None
                  and n not in listed)


@pytest.mark.parametrize("name", _provided_with_signature())
def test_signature_and_defaults_match(emulated_npu, name):
    obj = getattr(torch.npu, name)
    theirs = API[name]["params"]
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__") or obj.__dict__.get("__new__") or obj.__init__
        ours = [p for p in inspect.signature(init).parameters.values() if p.name not in ("self", "cls")]
    else:
        ours = list(inspect.signature(obj).parameters.values())
    their_names = [p[0] for p in theirs if not p[0].startswith("*")]
    our_names = [p.name for p in ours if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    assert our_names[: len(their_names)] == their_names, f"torch.npu.{name}: {our_names} vs torch_npu {their_names}"
    for (pname, default), p in zip([t for t in theirs if not t[0].startswith("*")], ours):
        if default is None or not re.fullmatch(r"None|True|False|-?\d+(\.\d+)?|'[^']*'", default):
            continue  # required, or a non-literal default (a constant of torch_npu's)
        assert _default_text(p) == default, f"torch.npu.{name}({pname}=...): {_default_text(p)} vs {default}"


def test_legacy_tensor_types(emulated_npu):
    t = torch.npu.FloatTensor(2, 3)
    assert t.shape == (2, 3) and t.dtype == torch.float32 and t.device.type == "npu"
    assert isinstance(t, torch.npu.FloatTensor) and not isinstance(t, torch.npu.HalfTensor)
    assert not isinstance(torch.zeros(2), torch.npu.FloatTensor)
    assert torch.npu.LongTensor([1, 2]).tolist() == [1, 2]
    assert isinstance(torch.ones(2, dtype=torch.bfloat16, device="npu"), torch.npu.BFloat16Tensor)


def test_per_process_memory_fraction_is_enforced(emulated_npu):
    try:
        base = torch.npu.memory_allocated()
        torch.npu.set_per_process_memory_fraction(float((base + 8 * 1024 * 1024) / torch.npu.mem_get_info()[1]))
        ok = torch.empty(1024 * 1024, device="npu")  # 4 MiB fits
        with pytest.raises(torch.OutOfMemoryError, match=r"NPU out of memory\. Tried to allocate 8\.00 MiB \(NPU 0; "
                                                         r"64\.00 GiB total capacity; .* allowed; "):
            torch.empty(2 * 1024 * 1024, device="npu")  # 8 more MiB do not
        assert torch.npu.memory_allocated() == base + ok.numel() * 4
        with pytest.raises(ValueError):
            torch.npu.set_per_process_memory_fraction(1.5)
    finally:
        torch.npu.set_per_process_memory_fraction(1.0)
    assert torch.npu.get_per_process_memory_fraction() == 1.0


def test_nested_stats_allocator_and_no_op_settings(emulated_npu):
    x = torch.ones(256, device="npu")
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.npu.memory_allocated() >= x.numel() * 4
    before = torch.npu.memory_allocated()
    ptr = torch.npu.caching_allocator_alloc(4096)
    assert ptr != 0 and torch.npu.memory_allocated() == before + 4096
    torch.npu.caching_allocator_delete(ptr)
    assert torch.npu.memory_allocated() == before
    torch.npu.set_sync_debug_mode("warn")
    assert torch.npu.get_sync_debug_mode() == 1
    torch.npu.set_sync_debug_mode(0)
    torch.npu.set_autocast_dtype(torch.bfloat16)
    try:
        assert torch.npu.get_autocast_dtype() == torch.bfloat16 == torch.get_autocast_dtype("npu")
    finally:
        torch.npu.set_autocast_dtype(torch.float16)
    rid = torch.npu.mstx.range_start("step")
    torch.npu.mstx.mark("x")
    torch.npu.mstx.range_end(rid)
    assert rid > 0 and torch.npu.is_current_stream_capturing() is False
    assert [g.device.index for g in torch.npu.default_generators] == list(range(torch.npu.device_count()))


def test_npu_events_are_torch_events_that_a_generic_stream_waits_on(emulated_npu):
    """FSDP2 makes events with torch.npu.Event and waits on them with torch.accelerator.current_stream()."""
    import torch

    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    assert isinstance(start, torch.Event) and start.device.type == "npu"
    start.record()
    torch.accelerator.current_stream().wait_event(start)   # a plain torch.Stream of the npu device
    end.record()
    assert end.query() and start.elapsed_time(end) >= 0.0
