"""The whole CUDA surface, decided once (shim/surface.py): every public name has a decision, every decision that
is not "harmless" has an implementation the shim installs, the harmless ones never reach the CUDA runtime, and
docs/shim.md shows the table generated from the installed torch."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import torch

import torchport.shim as shim
from torchport.shim import surface
from torchport.shim._cuda_api import user_implementations

ROOT = Path(__file__).resolve().parents[2]
NPU_API = ROOT / "tests" / "emulate" / "data" / "torch_npu_2_14_0_npu_api.json"


def _rows():
    return list(surface.walk())


def test_every_public_name_is_decided():
    rows = _rows()
    undecided = sorted(f"{r.module}.{r.name}" for r in rows if r.decision is None)
    assert not undecided, ("public CUDA names without a decision in torchport/shim/surface.py (a new torch "
                           f"release?): {undecided}")
    names = {f"{r.module}.{r.name}" for r in rows}
    for must in ("torch.cuda.init", "torch.cuda.memory._record_memory_history", "torch.backends.cudnn.benchmark",
                 "torch.backends.cuda.matmul.allow_tf32", "torch.cuda.nvtx.range_push", "torch.cuda.amp.custom_fwd"):
        assert must in names, must   # the walk reaches property modules, matmul flags and the private snapshot API
    assert len(rows) > 250


def test_decisions_and_implementations_agree():
    from torchport.backends import cpu
    from torchport.runtime.device import Target
    from torchport.shim._cuda_api import _api_for
    from torchport.shim._mapping import DeviceMap

    target = Target(backend=cpu.SPEC, index=0, reason="argument")
    impls = user_implementations(_api_for(target, DeviceMap(target, "gloo"), lambda *a: None, lambda m: None))
    for qual in impls:
        assert qual in surface.SURFACE, f"{qual} has an implementation but no decision"
        assert surface.SURFACE[qual].kind != "harmless", qual   # graphs names: from shim/_graphs.py's SECTIONS
    missing = [q for q, d in surface.SURFACE.items() if d.kind not in ("harmless", "graphs") and q not in impls]
    assert not missing, f"decided but not implemented: {missing}"
    kinds = {f"{r.module}.{r.name}": r.decision.kind for r in _rows()}
    pending = surface.unhandled()
    assert all(kinds[p] == "graphs" for p in pending), pending   # only the graphs names (shim/_graphs.py) may remain
    assert bool(pending) != surface.graphs_available()


def _floor() -> set[str]:
    """The CUDA names torch_npu's transfer_to_npu replaces: torch.cuda's names in torch_npu.npu.__all__ (it sets
    each of those on torch.cuda), torch.cuda.amp's, and the ones it patches by hand."""
    npu = set(json.loads(NPU_API.read_text())["names"])
    cuda = {n for n in dir(torch.cuda) if not n.startswith("_")}
    floor = {f"torch.cuda.{n}" for n in cuda & npu}
    floor |= {"torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.cuda.amp.custom_fwd",
              "torch.cuda.amp.custom_bwd", "torch.cuda.default_generators", "torch.cuda.CUDAGraph",
              "torch.cuda.DoubleTensor", "torch.cuda.memory._record_memory_history", "torch.cuda.memory._snapshot",
              "torch.cuda.memory._dump_snapshot"}
    floor |= {f"torch.cuda.{n}" for n in ("get_device_properties", "get_device_name", "get_device_capability",
                                          "list_gpu_processes", "set_device", "synchronize", "mem_get_info",
                                          "utilization", "set_per_process_memory_fraction",
                                          "caching_allocator_alloc", "get_rng_state", "set_rng_state")}
    return floor


def test_transfer_to_npu_list_is_the_floor():
    floor = _floor()
    assert len(floor) > 90
    for qual in sorted(floor):
        dec = surface.SURFACE.get(qual)
        assert dec is not None, f"{qual}: replaced by transfer_to_npu, not decided here"
        assert dec.kind != "harmless", f"{qual}: replaced by transfer_to_npu, left unchanged here"


def test_shim_replaces_every_handled_name_and_only_those():
    rows = [r for r in _rows() if r.decision is not None and r.module in sys.modules]
    before = {(r.module, r.name): vars(sys.modules[r.module]).get(r.name) for r in rows}
    shim.install("cpu")
    try:
        after = {(r.module, r.name): vars(sys.modules[r.module]).get(r.name) for r in rows}
    finally:
        shim.uninstall()
    for r in rows:
        key = (r.module, r.name)
        if key[1] not in vars(sys.modules[r.module]):
            continue   # served by a property module (cudnn flags) or __getattr__ (matmul): harmless by decision
        changed = after[key] is not before[key]
        kind = r.decision.kind
        if kind in ("harmless", "graphs") or r.qualname in ("torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler"):
            # graphs: shim/_graphs.py's; autocast / GradScaler are redirected in torch.amp's base classes
            assert not changed or kind == "graphs", f"{r.module}.{r.name} is {kind} but was replaced"
        else:
            assert changed, f"{r.module}.{r.name} ({kind}) still reaches the real torch.cuda under the shim"


#: arguments for the harmless functions that need some (a new harmless function without an entry fails the test)
PROBES = {
    "torch.backends.cuda.enable_flash_sdp": (True,), "torch.backends.cuda.enable_mem_efficient_sdp": (True,),
    "torch.backends.cuda.enable_math_sdp": (True,), "torch.backends.cuda.enable_cudnn_sdp": (True,),
    "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp": (True,),
    "torch.backends.cuda.can_use_flash_attention": "sdpa", "torch.backends.cuda.can_use_efficient_attention": "sdpa",
    "torch.backends.cudnn.is_acceptable": "tensor", "torch.cuda.classproperty": (lambda cls: 1,),
    **{f"torch.cuda.graphs.register_graph_{e}_hook": (lambda graph: None,) for e in (
        "capture_start", "capture_end", "destroy", "instantiate", "replay_start", "replay_end")},
    "torch.cuda.export_dot": ("unused.dot",), "torch.cuda.export_graph_data": ("unused.pickle",),
}


def _probe_args(qual: str):
    spec = PROBES.get(qual, ())
    if spec == "sdpa":
        q = torch.randn(1, 1, 4, 8)
        return (torch.backends.cuda.SDPAParams(q, q, q, None, 0.0, False, False),)
    if spec == "tensor":
        return (torch.zeros(1),)
    return spec


def test_harmless_callables_never_reach_the_cuda_runtime():
    """Call every harmless function of torch's (classes, decorators and re-exports aside) on this CUDA-less host:
    none may raise (a driver or NVML error would mean it reaches the CUDA runtime)."""
    import inspect
    import types

    from torch.utils.hooks import RemovableHandle

    called = []
    for r in _rows():
        if r.decision is None or r.decision.kind != "harmless" or r.alias or not r.callable:
            continue
        obj = getattr(importlib.import_module(r.module), r.name)
        if isinstance(obj, type) or not (getattr(obj, "__module__", "") or "").startswith("torch"):
            continue   # a type (decided as such), or not torch's
        qual = f"{r.module}.{r.name}"
        try:
            required = [p for p in inspect.signature(obj).parameters.values()
                        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            required = []
        assert not required or qual in PROBES, f"{qual}: add its arguments to PROBES"
        result = obj(*_probe_args(qual))
        if hasattr(result, "__enter__"):
            with result:
                pass
        if isinstance(result, RemovableHandle):   # a hook registered: leave torch's tables as they were
            result.remove()
        assert not isinstance(result, types.CoroutineType)
        called.append(qual)
    assert len(called) >= 20, called


def test_docs_table_is_current(emulated_npu):
    from torchport.shim._surface_doc import BEGIN, END, render

    text = (ROOT / "docs" / "shim.md").read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/shim.md lost its generated CUDA-surface table markers"
    documented = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert documented == render(torch.npu).strip(), "docs/shim.md is stale: run tools/render_shim_surface.py"


def test_compat_serves_every_handled_name_and_fix_writes_it():
    """torchport.compat (the fixed files' entry point) serves exactly the registry's non-harmless names, each with the
    shim's implementation; torchport fix rewrites a call of one into it without importing torch."""
    import subprocess

    from torchport.shim import compat
    from torchport.shim._cuda_api import implementations

    served = surface.served()
    impls = implementations()
    assert served <= set(impls), sorted(served - set(impls))
    assert compat.CUDA_NAMES == {q[len("torch.cuda."):] for q in served if q.count(".") == 2}
    for qual in served:
        assert compat.served(surface.compat_path(qual)), qual
    code = ("import sys\nfrom torchport.migrate import fix_source\n"
            "src = 'import torch\\ntorch.cuda.memory._record_memory_history()\\ntorch.backends.cuda.cublas_workspace_size()\\n'\n"
            "print(fix_source(src, unsafe=True))\nprint('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "torchport.compat.memory._record_memory_history()" in out, out
    assert "torchport.compat.backends.cuda.cublas_workspace_size()" in out, out
    assert out.strip().endswith("False"), out   # scan / fix read the registry without torch
