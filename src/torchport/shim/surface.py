"""The whole CUDA surface, decided once: every public name and what ``torchport run`` does with it.

One registry for the shim, for fixed files and for the docs. Its shape:

* :data:`SURFACE` maps a qualified name (``"torch.cuda.memory_allocated"``) to a :class:`Decision`:
  ``kind`` + ``text`` say what user code gets on a target without the backend function (always a CPU
  target), ``via`` names the selected backend's device-module attribute used where it has one
  (``torch.npu.memory_allocated``), ``npu`` overrides ``kind``/``text`` on an accelerator that lacks ``via``.
* Kinds: ``redirected`` (acts on the selected device), ``stand-in`` (a documented answer standing in for
  something the target does not have), ``harmless`` (left unchanged: ``text`` says why it cannot reach the
  CUDA runtime or change a result), ``refused`` (raises :class:`RefusedCall`, one line naming the call and
  ``text``, the fix), ``graphs`` (redirected to the backend's graph API, ``shim/_graphs.py``).
* :func:`walk` lists every public name of :data:`MODULES` on the installed torch with its decision (or
  None: undecided -- ``tests/shim/test_surface.py`` fails on it, so a new torch release cannot add an
  unhandled name silently). Names identical to a ``torch.cuda`` name (``torch.cuda.memory.memory_allocated``)
  share its decision; names that are not torch's (``os``, ``typing.Any``) are harmless by rule.
* :func:`standin` looks an implementation up by qualified name: ``standin("torch.cuda.init")`` is what user
  code gets under ``torchport run`` for that name, on the selected device (or ``target``). Fixed files reach
  it through the one public entry point, ``torchport.compat`` (``shim/compat.py``): ``torchport.compat.init()``,
  ``torchport.compat.memory._snapshot()``, ``torchport.compat.backends.cuda.cublas_workspace_size()`` -- the
  names of :func:`served` at :func:`compat_path`; :func:`fix_expression` spells the callee for a rewrite. The
  implementations live in ``_cuda_api.py`` / ``_cuda_streams.py`` / ``_cuda_memory.py`` / ``_cuda_extras.py``
  (and ``_graphs.py``), keyed by the same qualified names.

The table in docs/shim.md is rendered from this module (``tools/render_shim_surface.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
import sys
import types
from typing import Any, Iterable, Iterator

__all__ = ["Decision", "SURFACE", "MODULES", "KINDS", "RefusedCall", "Row", "walk", "decision_for", "treatment", "standin",
           "served", "compat_path", "qualname_of", "fix_expression", "unhandled", "graphs_available"]

#: the modules whose public names are decided (the issue's list)
MODULES = ("torch.cuda", "torch.cuda.amp", "torch.cuda.memory", "torch.cuda.nvtx", "torch.cuda.graphs",
           "torch.backends.cuda", "torch.backends.cudnn")
KINDS = ("redirected", "stand-in", "harmless", "refused", "graphs")


class RefusedCall(RuntimeError):
    """A CUDA call ``torchport run`` cannot do on the selected device; the message names the call and the fix."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """What user code gets for one name (see the module docstring)."""

    kind: str
    text: str
    via: str = ""
    npu: tuple[str, str] | None = None
    note: str = ""      # added to "torch.npu.<via>" where the backend has it

    def __post_init__(self) -> None:
        for kind in (self.kind, *(self.npu[:1] if self.npu else ())):
            if kind not in KINDS:
                raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")


def _r(text: str, via: str = "", npu: tuple[str, str] | None = None) -> Decision:
    return Decision("redirected", text, via, npu)


def _s(text: str, via: str = "", npu: tuple[str, str] | None = None) -> Decision:
    return Decision("stand-in", text, via, npu)


def _h(why: str) -> Decision:
    return Decision("harmless", why)


def _x(fix: str, via: str = "") -> Decision:
    return Decision("refused", fix, via)


_GRAPHS = Decision("graphs", "redirected to the backend's graph API (BackendSpec.graph_api), else the host capture-and-replay of runtime/graphs.py (shim/_graphs.py)")
_TYPE = "a type: naming or isinstance-testing it starts no CUDA work"
_EXC = "an exception type (`except` clauses only): the target's errors keep their own types"
_BUILD = "a fact about this torch build (no device, no driver): the same answer under `run`"
_SDPA = "torch's global SDPA backend preference (no CUDA call); the CPU's SDPA reads the flash/math flags too"
_KNOB = ("a torch-global flag that only CUDA kernels read: setting it changes nothing on another target "
         "(reproducibility there: torch.use_deterministic_algorithms(True))")
_NVML = "reads NVIDIA's NVML, which no other target has: remove the call or guard it with `if torchport.current().type == \"cuda\":`"
_DEV = "torch.cuda.{0}"

_CUDA: dict[str, Decision] = {
    # -- device selection and queries
    "is_available": _r("True when an accelerator was selected (False on the CPU fallback); libraries get the real answer"),
    "device_count": _r("the selected backend's count; 1 on the CPU fallback"),
    "current_device": _r("the current index on the selected backend", "current_device", ),
    "set_device": _r("the selected backend's device `i` becomes current", "set_device", ),
    "device": _r("`with torch.cuda.device(i):` index `i` of the selected backend"),
    "device_of": _r("`with torch.cuda.device_of(t):` the device of `t` when it is on the selected type, else a no-op"),
    "init": _s("a no-op: nothing to initialise", "init"),
    "is_initialized": _s("True: nothing to initialise", "is_initialized"),
    "is_bf16_supported": _r("the selected backend's answer (False on the CPU fallback)"),
    "is_tf32_supported": _s("False: TF32 is an NVIDIA format (the npu's HF32: torch.npu.matmul.allow_hf32)"),
    "get_device_name": _s("the host CPU's name", "get_device_name"),
    "get_device_capability": Decision("stand-in", "(0, 0): no CUDA compute capability, so `>= (8, 0)` tests take "
                                      "their conservative path", "get_device_capability",
                                      note="((0, 0) where it answers None, as torch_npu does)"),
    "get_device_properties": _s("name, total_memory (host RAM), major=minor=0, multi_processor_count (cores)",
                                "get_device_properties"),
    "can_device_access_peer": _s("False: one device, no peers (an index other than 0 raises AssertionError)",
                                 "can_device_access_peer"),
    "synchronize": _r("a no-op on the CPU (work is synchronous)", "synchronize"),
    "ipc_collect": _s("a no-op: no inter-process device memory", "ipc_collect"),
    "get_sync_debug_mode": _s("the mode last set (the CPU never synchronises implicitly, so it never warns)",
                              "get_sync_debug_mode"),
    "set_sync_debug_mode": _s("remembered; the CPU never synchronises implicitly", "set_sync_debug_mode"),
    "get_arch_list": _h(_BUILD),
    "get_gencode_flags": _h(_BUILD),
    "current_blas_handle": _x("a cuBLAS handle feeds CUDA kernels only; call the kernel's portable op instead",
                              "current_blas_handle"),
    "current_solver_handle": _x("a cuSOLVER handle feeds CUDA kernels only; use torch.linalg"),
    "cudart": _x("the CUDA runtime bindings have no counterpart; guard with `if torchport.current().type == \"cuda\":`"),
    "check_error": _x("checks a CUDA runtime error code (from cudart()); guard with `if torchport.current().type == \"cuda\":`"),
    # -- monitoring (NVML)
    "utilization": _s("the share of the host's CPU time this process used since the previous call (0-100)",
                      "utilization"),
    "device_memory_used": _s("bytes in use on the device: mem_get_info's total - free (host RAM on the CPU)"),
    "list_gpu_processes": _s("a header line and this process's bytes on the device (other processes are not visible)"),
    "temperature": _x(_NVML),
    "power_draw": _x(_NVML),
    "clock_rate": _x(_NVML),
    "memory_usage": _x(_NVML),
    # -- allocator
    "empty_cache": _r("the selected backend's cache (a no-op on the CPU)", "empty_cache"),
    "memory_allocated": _s("0: the CPU allocator keeps no statistics", "memory_allocated"),
    "max_memory_allocated": _s("0", "max_memory_allocated"),
    "memory_reserved": _s("0", "memory_reserved"),
    "max_memory_reserved": _s("0", "max_memory_reserved"),
    "memory_cached": _s("0 (memory_reserved's old name)", "memory_cached"),
    "max_memory_cached": _s("0 (max_memory_reserved's old name)", "max_memory_cached"),
    "reset_peak_memory_stats": _s("a no-op", "reset_peak_memory_stats"),
    "reset_max_memory_allocated": _s("a no-op", "reset_max_memory_allocated"),
    "reset_max_memory_cached": _s("a no-op", "reset_max_memory_cached"),
    "reset_accumulated_memory_stats": _s("a no-op", "reset_accumulated_memory_stats"),
    "memory_stats": _s("{}", "memory_stats"),
    "memory_stats_as_nested_dict": _s("{}", "memory_stats_as_nested_dict"),
    "memory_summary": _s("one line saying there are no device memory statistics", "memory_summary"),
    "memory_snapshot": _s("[]: no device segments", "memory_snapshot"),
    "mem_get_info": _s("(free, total) host RAM", "mem_get_info"),
    "set_per_process_memory_fraction": _s(
        "checked (a float in [0, 1]) and not enforced: the CPU allocator has no per-process limit "
        "(one warning, a note in the report)", "set_per_process_memory_fraction"),
    "get_per_process_memory_fraction": _s("1.0: the limit in force", "get_per_process_memory_fraction"),
    "caching_allocator_alloc": _s("a host block of `size` bytes (its address), kept until caching_allocator_delete",
                                  "caching_allocator_alloc"),
    "caching_allocator_delete": _s("frees a block from caching_allocator_alloc", "caching_allocator_delete"),
    "caching_allocator_enable": _s("a no-op: the target's allocator keeps its own caching policy"),
    "caching_allocator_disabled": _s("a context that changes nothing: the target's allocator keeps its caching policy"),
    "get_allocator_backend": _s('"native" (torch\'s allocator; never "cudaMallocAsync")', "get_allocator_backend"),
    "host_memory_stats": _s("{}: no pinned host memory on this target", "host_memory_stats",
                            npu=("stand-in", "{}: the backend keeps no pinned-memory statistics")),
    "host_memory_stats_as_nested_dict": _s("{}", "host_memory_stats_as_nested_dict"),
    "reset_accumulated_host_memory_stats": _s("a no-op", "reset_accumulated_host_memory_stats"),
    "reset_peak_host_memory_stats": _s("a no-op", "reset_peak_host_memory_stats"),
    "MemPool": _x("memory pools plug into a device caching allocator, which this target lacks; drop the pool",
                  "MemPool"),
    "use_mem_pool": _x("memory pools plug into a device caching allocator, which this target lacks; drop the pool",
                       "use_mem_pool"),
    "CUDAPluggableAllocator": _x("a CUDA allocator library cannot serve another device; on an npu use "
                                 "torch.npu.NPUPluggableAllocator with an allocator built for it"),
    "change_current_allocator": _x("installs a CUDA allocator library; on an npu use "
                                   "torch.npu.change_current_allocator with an allocator built for it"),
    # -- RNG
    "manual_seed": _r("the CPU generator", "manual_seed"),
    "manual_seed_all": _r("the CPU generator", "manual_seed_all"),
    "seed": _r("the CPU generator", "seed"),
    "seed_all": _r("the CPU generator", "seed_all"),
    "initial_seed": _r("the CPU generator", "initial_seed"),
    "get_rng_state": _r("the CPU generator's state", "get_rng_state"),
    "set_rng_state": _r("the CPU generator's state", "set_rng_state"),
    "get_rng_state_all": _r("[the CPU generator's state]", "get_rng_state_all"),
    "set_rng_state_all": _r("the CPU generator's state", "set_rng_state_all"),
    "default_generators": _r("(torch.default_generator,): the CPU generator", "default_generators"),
    # -- streams and events
    "Stream": _s("a CPU stream: work is synchronous, waits are no-ops", "Stream"),
    "Event": _s("a host-clock event: elapsed_time in ms between two record() calls", "Event"),
    "ExternalStream": _x("wraps a raw CUDA stream handle, which this target cannot run; drop it", "ExternalStream"),
    "get_stream_from_external": Decision("refused", "wraps a raw CUDA stream handle, which this target cannot run; "
                                         "drop it", "ExternalStream", note="(data_ptr, device)"),
    "current_stream": _s("the CPU stream made current by set_stream / stream(s), else the default one",
                         "current_stream"),
    "default_stream": _s("the default CPU stream", "default_stream"),
    "set_stream": _s("makes the CPU stream current (current_stream() returns it)", "set_stream"),
    "stream": _s("`with torch.cuda.stream(s):` makes `s` current for the block", "stream"),
    "StreamContext": _s("makes the CPU stream current for the block", "StreamContext"),
    "GreenContext": _x("green contexts partition NVIDIA SMs; no other target has them: drop it, or on an npu "
                       "use torch.npu.set_device_limit / set_stream_limit"),
    # -- legacy types
    **{f"{t}Tensor": _r(f"a {t.lower()} tensor on the selected device") for t in (
        "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")},
    **{f"{t}Storage": _r(f"a {t.lower()} storage on the selected device") for t in (
        "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "ComplexFloat",
        "ComplexDouble")},
    # -- graphs (shim/_graphs.py)
    **{n: _GRAPHS for n in ("CUDAGraph", "graph", "make_graphed_callables", "is_current_stream_capturing",
                            "graph_pool_handle")},
    **{n: _h("builds a hook function (plain Python, no CUDA call); only a torch.cuda.CUDAGraph would run it")
       for n in ("export_dot", "export_graph_data")},
    # -- exceptions, constants, helpers
    "OutOfMemoryError": _h("is torch.OutOfMemoryError, which every backend's allocator raises: "
                           "`except torch.cuda.OutOfMemoryError` catches an npu OOM"),
    "AcceleratorError": _h("is torch.AcceleratorError, the error of every accelerator"),
    "CudaError": _h(_EXC),
    "DeferredCudaCallError": _h(_EXC),
    "cudaStatus": _h("two integer constants (SUCCESS, ERROR_NOT_READY)"),
    "has_half": _h("a constant (True)"),
    "has_magma": _h(_BUILD),
    "DEVICE_REQUIREMENT": _h("a table of driver versions (data)"),
    "DEVICE_REQUIREMENT_POST_JETSON_SBSA_UNIFICATION": _h("a table of driver versions (data)"),
    "PYTORCH_RELEASES_CODE_CC": _h("a table of compute capabilities per release (data)"),
    "Device": _h("a typing alias"),
    "TYPE_CHECKING": _h("a constant (False)"),
    "classproperty": _h("a decorator (torch._utils)"),
    # -- submodules: the walked ones are decided name by name; the others are reported by `torchport scan`
    "amp": _h("a module: its names are decided under torch.cuda.amp"),
    "memory": _h("a module: its names are decided under torch.cuda.memory"),
    "nvtx": _h("a module: its names are decided under torch.cuda.nvtx"),
    "graphs": _h("a module: its names are decided under torch.cuda.graphs"),
    "random": _h("a module: the same functions as torch.cuda's seeding names"),
    "streams": _h("a module: the same classes as torch.cuda.Stream / Event / ExternalStream"),
    "sparse": _h("a module of CUDA sparse-tensor types (not walked; `torchport scan` reports uses, TP199)"),
    **{n: _h("a CUDA-only module (not walked; `torchport scan` reports uses, TP199)") for n in (
        "gds", "graph_annotations", "green_contexts", "jiterator", "nccl", "profiler", "tunable")},
}

_AMP: dict[str, Decision] = {
    "autocast": _r("autocast on the selected device type (dtype per the backend's AMP policy)"),
    "GradScaler": _r("a GradScaler of the selected device type"),
    "custom_fwd": _r("torch.amp.custom_fwd(device_type=<the selected type>): cast_inputs follows that autocast"),
    "custom_bwd": _r("torch.amp.custom_bwd(device_type=<the selected type>)"),
    "amp_definitely_not_available": _r("False when an accelerator was selected"),
    **{n: _h("a module: its names are decided under torch.cuda.amp") for n in ("autocast_mode", "common",
                                                                               "grad_scaler")},
}

_MEMORY: dict[str, Decision] = {
    "_record_memory_history": _x("the CPU allocator keeps no history: use "
                                 "torch.profiler.profile(profile_memory=True)", "memory._record_memory_history"),
    "_snapshot": _x("the CPU allocator keeps no history: use torch.profiler.profile(profile_memory=True)",
                    "memory._snapshot"),
    "_dump_snapshot": Decision("refused", "the CPU allocator keeps no history: use "
                               "torch.profiler.profile(profile_memory=True)", "memory._snapshot",
                               note="(pickled to the file where the backend has no memory._dump_snapshot)"),
}

_NVTX: dict[str, Decision] = {
    n: _r("torch.profiler.record_function ranges: visible in the torch profiler on every target")
    for n in ("range_push", "range_pop", "range_start", "range_end", "range", "mark")
}

_GRAPH_HOOKS = {n: _h("registers a callback in torch's own table (plain Python, no CUDA call); it fires on "
                      "torch's CUDA graphs only, not on the backend's or the host capture") for n in (
    "register_graph_capture_start_hook", "register_graph_capture_end_hook", "register_graph_destroy_hook",
    "register_graph_instantiate_hook", "register_graph_replay_start_hook", "register_graph_replay_end_hook")}

_BACKENDS_CUDA: dict[str, Decision] = {
    "is_built": _h(_BUILD),
    "is_flash_attention_available": _h(_BUILD),
    "is_ck_sdpa_available": _h(_BUILD),
    "can_use_flash_attention": _h("checks the tensors' properties only (False for tensors off CUDA)"),
    "can_use_efficient_attention": _h("checks the tensors' properties only (False for tensors off CUDA)"),
    "can_use_cudnn_attention": _s("False: no cuDNN attention kernel on this target"),
    **{n: _h(_SDPA) for n in ("enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp",
                              "mem_efficient_sdp_enabled", "enable_math_sdp", "math_sdp_enabled",
                              "enable_cudnn_sdp", "cudnn_sdp_enabled", "allow_fp16_bf16_reduction_math_sdp",
                              "fp16_bf16_reduction_math_sdp_allowed", "sdp_kernel")},
    **{n: _h("sets or reads torch's global library preference (no CUDA call); only CUDA kernels read it")
       for n in ("preferred_blas_library", "preferred_linalg_library", "preferred_rocm_fa_library")},
    **{n: _s("0: no cuBLAS workspace on this target (a size given is checked and ignored)")
       for n in ("cublas_workspace_size", "cublaslt_workspace_size", "blas_workspace_size")},
    "cufft_plan_cache": _s("no FFT plan cache: size 0, clear() a no-op, max_size kept but limiting nothing"),
    "matmul": _h("holds the cuBLAS flags below"),
    "SDPAParams": _h(_TYPE),
    "SDPBackend": _h("an enum"),
    **{n: _h(_TYPE) for n in ("cuBLASModule", "cuFFTPlanCache", "cuFFTPlanCacheAttrContextProp",
                              "cuFFTPlanCacheManager")},
}

_CUDNN: dict[str, Decision] = {
    "is_available": _h(_BUILD + " (cuDNN ships in this torch build)"),
    "version": _h(_BUILD),
    "is_acceptable": _h("checks a tensor's properties only (False for tensors off CUDA)"),
    "flags": _h("a context setting the flags below"),
    "set_flags": _h("sets the flags below"),
    **{n: _h(_KNOB) for n in ("enabled", "benchmark", "deterministic", "allow_tf32", "benchmark_limit",
                              "fp32_precision", "conv", "depthwise_kernel")},
    "rnn": _h("a module of cuDNN RNN helpers, used by torch's CUDA RNN kernels only"),
    "CUDNN_TENSOR_DTYPES": _h("a set of dtypes (data)"),
    "ContextProp": _h(_TYPE),
    "PropModule": _h(_TYPE),
    "CudnnModule": _h(_TYPE),
}

#: every decided name, by qualified name
SURFACE: dict[str, Decision] = {
    **{f"torch.cuda.{k}": v for k, v in _CUDA.items()},
    **{f"torch.cuda.amp.{k}": v for k, v in _AMP.items()},
    **{f"torch.cuda.memory.{k}": v for k, v in _MEMORY.items()},
    **{f"torch.cuda.nvtx.{k}": v for k, v in _NVTX.items()},
    **{f"torch.cuda.graphs.{k}": v for k, v in _GRAPH_HOOKS.items()},
    **{f"torch.backends.cuda.{k}": v for k, v in _BACKENDS_CUDA.items()},
    "torch.backends.cuda.matmul.*": _h("a cuBLAS flag: only CUDA matmuls read it (the CPU's oneDNN matmul precision, "
                                       "torch.backends.mkldnn.matmul.fp32_precision, stays as it was)"),
    **{f"torch.backends.cudnn.{k}": v for k, v in _CUDNN.items()},
}

#: private names that scripts call and that are decided too (documented by torch as the memory-snapshot API)
PRIVATE = ("torch.cuda.memory._record_memory_history", "torch.cuda.memory._snapshot",
           "torch.cuda.memory._dump_snapshot")


def _public_names(modname: str, module: Any) -> list[str]:
    """The public names of ``module`` on the installed torch: ``dir()``, plus what a property module
    (torch.backends.cudnn) serves from its real module and class."""
    names = {n for n in dir(module) if not n.startswith("_")}
    real = getattr(module, "m", None)
    if isinstance(real, types.ModuleType) and real is not module:   # torch.backends.PropModule
        names.discard("m")
        names |= {n for n in dir(real) if not n.startswith("_")}
        names |= {n for n in vars(type(module)) if not n.startswith("_")}
    return sorted(names)


def matmul_flags() -> list[str]:
    """The attributes ``torch.backends.cuda.matmul`` serves (read from its ``__getattr__`` on the installed torch)."""
    import torch.backends.cuda as bc

    try:
        source = inspect.getsource(type(bc.matmul).__getattr__)
    except (OSError, TypeError):  # no source shipped: the documented four
        return ["allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
                "fp32_precision"]
    return sorted(set(re.findall(r'name == "(\w+)"', source)))


def _auto(module: Any, name: str, obj: Any) -> Decision | None:
    """Names that are not torch's CUDA API by rule: imported modules and objects from outside torch."""
    if isinstance(obj, types.ModuleType):
        if not obj.__name__.startswith(("torch.cuda", "torch.backends")):
            return _h(f"an imported module ({obj.__name__}), not a CUDA API")
        return None
    origin = getattr(obj, "__module__", None)
    if isinstance(origin, str) and not (origin == "torch" or origin.startswith("torch.")):
        return _h(f"re-exported from {origin}: not a CUDA API")
    if origin == "torch" and isinstance(obj, type) and obj.__name__ == name and getattr(sys.modules["torch"], name,
                                                                                    None) is obj:
        if name not in ("OutOfMemoryError", "AcceleratorError"):
            return _h(f"is torch.{name}, not CUDA's")
    return None


def decision_for(modname: str, name: str, obj: Any = None) -> tuple[str, Decision | None]:
    """``(qualified name the decision is filed under, decision or None)`` for ``modname.name``."""
    qual = f"{modname}.{name}"
    if qual in SURFACE:
        return qual, SURFACE[qual]
    cuda = sys.modules.get("torch.cuda")
    if modname != "torch.cuda" and modname.startswith("torch.cuda") and cuda is not None:
        if obj is not None and vars(cuda).get(name) is obj and f"torch.cuda.{name}" in SURFACE:
            return f"torch.cuda.{name}", SURFACE[f"torch.cuda.{name}"]
    module = sys.modules.get(modname)
    return qual, _auto(module, name, obj) if obj is not None else None


@dataclasses.dataclass(frozen=True)
class Row:
    """One walked name: where it lives, the object, and its decision (None = undecided)."""

    module: str
    name: str
    qualname: str       # the name the decision is filed under (the torch.cuda name for an alias)
    decision: Decision | None
    callable: bool

    @property
    def alias(self) -> bool:
        """The same object as a ``torch.cuda`` name (decided there)."""
        return self.qualname != f"{self.module}.{self.name}" and not self.qualname.endswith(".*")


def walk() -> Iterator[Row]:
    """Every public name of :data:`MODULES` (plus :data:`PRIVATE` and the matmul flags) with its decision."""
    for modname in MODULES:
        module = importlib.import_module(modname)
        for name in _public_names(modname, module):
            try:
                obj = getattr(module, name)
            except Exception:  # a property that needs the device to be read: decided by name
                obj = None
            qual, dec = decision_for(modname, name, obj)
            yield Row(modname, name, qual, dec, callable(obj) and not isinstance(obj, types.ModuleType))
    for qual in PRIVATE:
        modname, _, name = qual.rpartition(".")
        yield Row(modname, name, qual, SURFACE.get(qual), True)
    for flag in matmul_flags():
        yield Row("torch.backends.cuda.matmul", flag, "torch.backends.cuda.matmul.*",
                  SURFACE["torch.backends.cuda.matmul.*"], False)


def treatment(decision: Decision, target_module: Any = None, accelerator: bool = False,
              device_type: str = "npu") -> tuple[str, str]:
    """``(kind, text)`` of ``decision`` on a target whose device module is ``target_module`` (None on CPU)."""
    if decision.via and target_module is not None and _has(target_module, decision.via):
        return "redirected", f"torch.{device_type}.{decision.via}" + (f" {decision.note}" if decision.note else "")
    if accelerator and decision.npu is not None:
        return decision.npu
    return decision.kind, decision.text


def _has(module: Any, path: str) -> bool:
    obj = module
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:
            return False
    return True


def graphs_available() -> bool:
    """True when this build has ``shim/_graphs.py`` (the CUDA-graph redirects)."""
    import importlib.util

    return importlib.util.find_spec("torchport.shim._graphs") is not None


def unhandled(rows: Iterable[Row] | None = None) -> list[str]:
    """Callables decided as not harmless that the shim has no implementation for: they would still reach the
    real ``torch.cuda`` from user code (graphs names count as handled only when ``shim/_graphs.py`` exists)."""
    from torchport.backends import cpu
    from torchport.runtime.device import Target
    from torchport.shim._cuda_api import implementations

    impls = implementations(Target(backend=cpu.SPEC, index=0, reason="argument"))
    out = []
    for row in rows if rows is not None else walk():
        dec = row.decision
        if dec is None or dec.kind == "harmless" or row.qualname in impls:
            continue
        if dec.kind == "graphs" and graphs_available():
            continue
        out.append(row.qualname)   # an alias counts once, under its torch.cuda name
    return sorted(set(out))


@functools.lru_cache(maxsize=1)
def served() -> frozenset[str]:
    """The qualified names ``torchport.compat`` serves: every decided name that is not harmless (graphs names once
    ``shim/_graphs.py`` exists). Torch-free: ``torchport scan`` / ``fix`` read it without importing torch."""
    return frozenset(q for q, d in SURFACE.items() if d.kind not in ("harmless", "graphs")
                     or (d.kind == "graphs" and graphs_available()))


def compat_path(qualname: str) -> str:
    """Where ``torchport.compat`` serves ``qualname``: ``torch.cuda.X`` -> ``X``, ``torch.cuda.memory._snapshot`` ->
    ``memory._snapshot``, ``torch.backends.cuda.X`` -> ``backends.cuda.X``."""
    if qualname.startswith("torch.cuda."):
        return qualname[len("torch.cuda."):]
    return qualname[len("torch."):]


def qualname_of(path: str) -> str:
    """The inverse of :func:`compat_path`."""
    return f"torch.{path}" if path.startswith("backends.") else f"torch.cuda.{path}"


def fix_expression(qualname: str, tp: str = "torchport") -> str | None:
    """The callee a fixed file writes in place of ``qualname`` to do what ``torchport run`` does
    (``torchport.compat.memory._snapshot`` for ``torch.cuda.memory._snapshot``), or None when it is not served
    (harmless names stay as written). A rewrite keeps the call's arguments."""
    if qualname not in served():
        return None
    return f"{tp}.compat.{compat_path(qualname)}"


def standin(qualname: str, target: Any = None) -> Any:
    """What user code gets for ``qualname`` under ``torchport run``, on ``target`` (default: the selected device);
    ``torchport.compat`` serves these to fixed files (``torchport.compat.memory_summary`` is
    ``standin("torch.cuda.memory_summary")``)::

        print(standin("torch.cuda.memory_summary")())
        with standin("torch.cuda.device")(1): ...

    Harmless names return torch's own object. Raises KeyError for a name :data:`SURFACE` does not decide.
    """
    from torchport.shim._cuda_api import implementations

    if qualname not in SURFACE and not qualname.startswith("torch.backends.cuda.matmul."):
        raise KeyError(f"{qualname!r} is not a decided CUDA name (see torchport.shim.surface.SURFACE)")
    impl = implementations(target).get(qualname)
    if impl is not None:
        return impl
    modname, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(modname), name)
