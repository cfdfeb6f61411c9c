"""TP110-TP199: the ``torch.cuda.*`` runtime API, cuDNN knobs and CUDA_VISIBLE_DEVICES.

Each rule owns a group of ``torch.cuda`` names. Where torchport or torch core has a
device-generic equivalent the call is rewritten; the rest are reported with what to
write instead. ``TP199`` catches every other ``torch.cuda.*`` use, so nothing under
``torch.cuda`` goes unreported.
"""

from __future__ import annotations

from torchport.migrate._cst import cst   # LibCST on first use: the declarations need none
from torchport.migrate.rules.base import (COMPAT_NOTE, Rule, call_args_plain, compat_call, compat_reference,
                                          compat_reference_fix, compat_served, eq, keyword, positional,
                                          report_tune_assign)

__all__ = ["CudaIsAvailable", "CudaDeviceQuery", "CudaSetDevice", "CudaSynchronize", "CudaMemoryApi", "CudaRngApi",
           "CudaStreamEvent", "CudaNvtx", "CudnnKnob", "CudaVisibleDevices", "CudaApiOther"]


def _short(qualname: str) -> str:
    return qualname.rsplit(".", 1)[1]


class _Mapped(Rule):
    """A group of ``torch.cuda`` functions, some with a replacement expression.

    ``replacements`` maps the short name to ``(template, safety)``; ``{tp}`` and ``{torch}``
    in the template are the file's names for those modules, ``{q}`` a quote character.
    A template ending in ``(`` keeps the call's arguments (only the callee changes);
    any other template replaces the whole call, and is unsafe when the call had arguments.
    A call with no safe replacement goes to ``torchport.compat.<name>(...)`` when that serves the name
    (the shim's own implementation: what ``torchport run`` does, torch's function on CUDA) -- also where
    a replacement would drop the call's arguments, or is unsafe and ``--emit torch`` is not asked for.
    ``advice`` maps short names that stay reported to what to write instead.
    """

    replacements: dict[str, tuple[str, str]] = {}
    advice: dict[str, str] = {}

    def on_reference(self, ctx, node, qualname: str) -> None:
        hint = self.advice.get(_short(qualname), "see `torchport explain " + self.code + "`")
        ctx.report(self, node, f"`{qualname}` is CUDA-only; {hint}")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        short = _short(qualname)
        path = qualname[len("torch.cuda."):]   # where torchport.compat serves it: "memory_summary", "nvtx.range_push"
        rep = self.replacements.get(short)
        plain = call_args_plain(node)
        drops = rep is not None and not rep[0].endswith("(") and bool(node.args)
        if plain and compat_served(path) and (rep is None or drops or (rep[1] == "unsafe" and not ctx.emit_torch)):
            note = COMPAT_NOTE if ctx.emit_torch else ""
            ctx.report(self, node, f"`{qualname}` is CUDA-only; use `torchport.compat.{path}(...)`, what "
                                   f"`torchport run` does{note}", fix=lambda n: compat_call(ctx, path, n),
                       safety="safe")
            return
        if rep is None or not plain:
            hint = self.advice.get(short, "see `torchport explain " + self.code + "`")
            ctx.report(self, node, f"`torch.cuda.{short}` is CUDA-only; {hint}")
            return
        template, safety = rep
        quote = ctx.quote
        keeps_args = template.endswith("(")

        def fix(n: cst.Call) -> cst.BaseExpression:
            names = {"q": quote}
            if "{tp}" in template:  # only what the template uses, so no unused import is added
                names["tp"] = ctx.tp
            if "{torch}" in template:
                names["torch"] = ctx.torch
            code = template.format(**names)
            if keeps_args:
                return n.with_changes(func=ctx.expr(code[:-1]))
            return ctx.expr(code)

        if drops:
            safety = "unsafe"
        shown = template.format(tp="torchport", torch="torch", q='"')
        shown = shown + "...)" if keeps_args else shown
        note = " (its arguments are dropped)" if drops else ""
        ctx.report(self, node, f"`torch.cuda.{short}` is CUDA-only; use `{shown}`{note}", fix=fix, safety=safety)


class CudaIsAvailable(_Mapped):
    code = "TP110"
    name = "cuda-is-available"
    fix = "safe"
    names = ("torch.cuda.is_available",)
    replacements = {"is_available": ("{tp}.current().is_accelerator", "safe")}
    summary = "Finds `torch.cuda.is_available()`."
    why = ("It answers \"is there an NVIDIA GPU\", so on an NPU or XPU machine the script decides it has no "
           "accelerator and trains on the CPU.")
    example = "import torch\n\nuse_gpu = torch.cuda.is_available()\n"
    use_instead = "import torchport\n\nuse_gpu = torchport.current().is_accelerator\n"
    fix_notes = "Safe: becomes `torchport.current().is_accelerator` (true for any selected accelerator)."
    after_fix = "fixed"


class CudaDeviceQuery(_Mapped):
    code = "TP111"
    name = "cuda-device-query"
    fix = "safe"
    names = tuple(f"torch.cuda.{n}" for n in ("device_count", "current_device", "get_device_name",
                                              "get_device_properties", "get_device_capability", "get_arch_list",
                                              "is_bf16_supported", "is_initialized", "init"))
    replacements = {
        "current_device": ("{tp}.current().index", "safe"),
        "device_count": ("{tp}.current().backend.device_count()", "safe"),
        "is_bf16_supported": ("{tp}.current().backend.bf16_supported()", "safe"),
    }
    advice = {
        "get_arch_list": "it lists the CUDA architectures torch was built for (harmless without a GPU)",
    }
    summary = "Finds device queries: `torch.cuda.device_count()`, `current_device()`, `get_device_name()`, ..."
    why = "They count and describe NVIDIA GPUs only; on other accelerators they report zero devices."
    example = "import torch\n\nn = torch.cuda.device_count()\ni = torch.cuda.current_device()\n"
    use_instead = ("import torchport\n\nn = torchport.current().backend.device_count()\n"
                   "i = torchport.current().index\n")
    fix_notes = ("Safe: `current_device()` becomes `torchport.current().index`; `device_count()` becomes "
                 "`torchport.current().backend.device_count()` (the same count on a CUDA machine; 1, not 0, on a "
                 "CPU-only host); `is_bf16_supported()` becomes `torchport.current().backend.bf16_supported()` (the "
                 "device module's own answer: the same as torch's on CUDA and on an NPU, False on a CPU-only host, "
                 "as `torchport run` answers). "
                 "`get_device_name()`, `get_device_properties(i)` and `get_device_capability()` become "
                 "`torchport.compat.<name>(...)`: torch's own on CUDA, the selected device's (or the host's, on the CPU: "
                 "`(0, 0)`, the host's memory) elsewhere, as `torchport run` answers; so do `init()` and "
                 "`is_initialized()` (the selected backend's; a no-op and True on the CPU). `get_arch_list()` is "
                 "reported only.")
    after_fix = ("fixed: `device_count`, `current_device`, `is_bf16_supported`; redirected to runtime: "
                 "`get_device_name`, `get_device_properties`, `get_device_capability`, `init`, `is_initialized` "
                 "(`torchport.compat`); reported only -- harmless because `torchport run` leaves it alike: "
                 "`get_arch_list()` answers the build's list without a GPU")


class CudaSetDevice(_Mapped):
    code = "TP112"
    name = "cuda-set-device"
    severity = "error"
    fix = "safe"
    names = ("torch.cuda.set_device", "torch.cuda.device")
    summary = "Finds `torch.cuda.set_device(i)` and the `torch.cuda.device(i)` context manager."
    why = "Selecting a CUDA device raises on a host without CUDA; the NPU has its own `torch.npu.set_device`."
    example = "import torch\n\n\ndef worker(gpu):\n    torch.cuda.set_device(gpu)\n"
    use_instead = "import torchport\n\n\ndef worker(gpu):\n    torchport.select_device(index=gpu)\n"
    fix_notes = ("Safe: becomes `torchport.select_device(index=i)`: device `i` of the selected backend becomes "
                 "the current device of its module (as `set_device` did) *and* what `torchport.device()` and "
                 "`torchport.wrap_ddp(model)` use afterwards -- so an `mp.spawn` worker's `.cuda()` and "
                 "`DistributedDataParallel(model, device_ids=[gpu])` stay on device `i` once fixed. On the CPU the "
                 "index is ignored. A device that is not an integer index known from the file (see TP109) goes to "
                 "`torchport.compat.set_device(...)` (what `torchport run` does with it: `torch.device(\"cuda:1\")` "
                 "selects device 1 of the selected backend). `with torch.cuda.device(i):` becomes "
                 "`with torchport.compat.device(i):` -- device `i` for the block, the previous one after it, "
                 "`torchport.device()` included, as under `run`; torch's own context manager on CUDA (with "
                 "`--emit torch` and an integer index: `torch.accelerator.device_index(i if "
                 "torch.accelerator.is_available() else None)`). `torchport.init_distributed()` already selects the "
                 "device for torchrun jobs.")
    after_fix = ("fixed: `set_device(i)` with an integer index; redirected to runtime: `set_device(<a device>)` and "
                 "`with torch.cuda.device(i):` (`torchport.compat`)")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        arg = positional(node, 0) or keyword(node, "device")
        if qualname == "torch.cuda.device" and arg is not None and len(node.args) == 1 and call_args_plain(node) \
                and ctx.emit_torch:
            ctx.defer(lambda: self._device_index(ctx, node, arg, qualname))
            return
        if qualname != "torch.cuda.set_device" or arg is None or len(node.args) != 1 or not call_args_plain(node):
            super().on_call(ctx, node, qualname)
            return

        def later() -> None:
            if ctx.int_device(arg.value) is None:  # a device object or string: the backend module's own call
                super(CudaSetDevice, self).on_call(ctx, node, qualname)
                return
            ctx.report(self, node, "`torch.cuda.set_device` is CUDA-only; use `torchport.select_device(index=i)`",
                       fix=lambda n: cst.Call(func=ctx.expr(f"{ctx.tp}.select_device"), args=[cst.Arg(
                           n.args[0].value, keyword=cst.Name("index"), equal=eq())]))

        ctx.defer(later)

    def _device_index(self, ctx, node: cst.Call, arg: cst.Arg, qualname: str) -> None:
        """``--emit torch``: ``with torch.cuda.device(i):`` for an integer ``i`` becomes torch's
        ``torch.accelerator.device_index(i if torch.accelerator.is_available() else None)`` (a no-op on the CPU,
        as under ``run``); any other device stays on ``torchport.compat.device``."""
        if ctx.int_device(arg.value) is None:
            super().on_call(ctx, node, qualname)
            return
        space = cst.SimpleWhitespace(" ")

        def fix(n: cst.Call) -> cst.Call:
            index = cst.IfExp(test=ctx.expr(f"{ctx.torch}.accelerator.is_available()"), body=n.args[0].value,
                              orelse=cst.Name("None"), whitespace_before_if=space, whitespace_after_if=space,
                              whitespace_before_else=space, whitespace_after_else=space)
            return cst.Call(func=ctx.expr(f"{ctx.torch}.accelerator.device_index"), args=[cst.Arg(index)])

        ctx.report(self, node, "`torch.cuda.device(i)` is CUDA-only; use `torch.accelerator.device_index(i)` (None "
                               "without an accelerator)", fix=fix, safety="safe")


class CudaSynchronize(_Mapped):
    code = "TP113"
    name = "cuda-synchronize"
    severity = "error"
    fix = "safe"
    names = ("torch.cuda.synchronize",)
    replacements = {"synchronize": ("{tp}.synchronize()", "safe")}
    summary = "Finds `torch.cuda.synchronize()`."
    why = "Raises without CUDA; timing code around it is where portable scripts most often break."
    example = "import torch\n\ntorch.cuda.synchronize()\n"
    use_instead = "import torchport\n\ntorchport.synchronize()\n"
    fix_notes = ("Safe: becomes `torchport.synchronize()` (a no-op on CPU); with a device argument, "
                 "`torchport.compat.synchronize(device)` (what `torchport run` does with it). "
                 "`torch.accelerator.synchronize()` is the torch-core spelling on torch >= 2.6.")
    after_fix = "fixed; redirected to runtime: `synchronize(device)` (`torchport.compat`)"


class CudaMemoryApi(_Mapped):
    code = "TP114"
    name = "cuda-memory-api"
    fix = "safe"
    names = tuple(f"torch.cuda.{n}" for n in (
        "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
        "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats", "memory_summary", "mem_get_info",
        "set_per_process_memory_fraction", "reset_accumulated_memory_stats", "memory_snapshot",
        "max_memory_cached", "memory_cached", "reset_max_memory_cached", "list_gpu_processes"))
    replacements = {
        "empty_cache": ("{tp}.empty_cache()", "safe"),
        "memory_allocated": ("({tp}.memory_stats()[{q}allocated_bytes{q}] or 0)", "safe"),
        "max_memory_allocated": ("({tp}.memory_stats()[{q}peak_bytes{q}] or 0)", "safe"),
        "memory_reserved": ("({tp}.memory_stats()[{q}reserved_bytes{q}] or 0)", "safe"),
        "reset_peak_memory_stats": ("{tp}.reset_peak_memory()", "safe"),
        "reset_max_memory_allocated": ("{tp}.reset_peak_memory()", "safe"),
    }
    advice = {"memory_snapshot": "use `torchport.memory_stats()`", "list_gpu_processes": "use `torchport doctor`"}
    summary = "Finds the CUDA caching-allocator API: `empty_cache`, `memory_allocated`, `max_memory_allocated`, ..."
    why = ("Memory statistics read the CUDA allocator only: on an NPU they report 0 (or raise), so memory logs and "
           "out-of-memory guards stop working.")
    example = "import torch\n\ntorch.cuda.reset_peak_memory_stats()\npeak = torch.cuda.max_memory_allocated()\n"
    use_instead = ('import torchport\n\ntorchport.reset_peak_memory()\n'
                   'peak = (torchport.memory_stats()["peak_bytes"] or 0)\n')
    fix_notes = ("Safe: `empty_cache()`, `reset_peak_memory_stats()`, `memory_allocated()`, "
                 "`max_memory_allocated()`, `memory_reserved()` map to `torchport.empty_cache()`, "
                 "`torchport.reset_peak_memory()` and `torchport.memory_stats()` (0 on CPU). With a device argument, "
                 "and for `memory_summary()`, `mem_get_info()`, `memory_stats()`, `max_memory_reserved()`, "
                 "`reset_accumulated_memory_stats()`, `reset_max_memory_cached()`, the call becomes "
                 "`torchport.compat.<name>(...)`: torch's own on CUDA, the selected device's elsewhere, the shim's "
                 "host stand-ins on the CPU (0, `{}`, a one-line summary, the host's free and total memory) -- what "
                 "`torchport run` answers; so do `set_per_process_memory_fraction()` (enforced by the backend's "
                 "allocator where it has one: an allocation past it raises the error `torch.cuda.OutOfMemoryError` "
                 "catches; checked, not enforced, on the CPU), `memory_snapshot()`, `memory_cached()`, "
                 "`max_memory_cached()` and `list_gpu_processes()`.")
    after_fix = ("fixed: `empty_cache`, `reset_peak_memory_stats`, `memory_allocated`, `max_memory_allocated`, "
                 "`memory_reserved`; redirected to runtime: every other call, and any call with a device "
                 "(`torchport.compat`)")


class CudaRngApi(_Mapped):
    code = "TP115"
    name = "cuda-rng-api"
    fix = "safe"
    names = tuple(f"torch.cuda.{n}" for n in ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
                                              "get_rng_state", "get_rng_state_all", "set_rng_state",
                                              "set_rng_state_all"))
    replacements = {"manual_seed": ("{torch}.manual_seed(", "unsafe"),
                    "manual_seed_all": ("{torch}.manual_seed(", "unsafe")}
    summary = "Finds CUDA random-generator calls: `torch.cuda.manual_seed(_all)`, `get/set_rng_state`, ..."
    why = "They seed or snapshot only CUDA generators; on an NPU the device generator stays unseeded."
    example = "import torch\n\ntorch.cuda.manual_seed_all(seed)\n"
    use_instead = "import torchport\n\ntorchport.compat.manual_seed_all(seed)\n"
    fix_notes = ("Safe: every call becomes `torchport.compat.<name>(...)`: torch's own on CUDA; elsewhere the "
                 "selected device's generator (the CPU generator on the CPU), as `torchport run` seeds, saves and "
                 "restores it -- the CPU generator's draws stay what they were. With `--emit torch`, "
                 "`manual_seed(_all)(s)` becomes `torch.manual_seed(s)` (unsafe: it also re-seeds the CPU "
                 "generator); the rest stays on `torchport.compat`. `torchport.seed_everything(seed)` seeds Python, "
                 "NumPy and torch in one call.")
    after_fix = "redirected to runtime: every call (`torchport.compat`, or with `--emit torch` `torch.manual_seed` for the seeding)"


class CudaStreamEvent(_Mapped):
    code = "TP116"
    name = "cuda-stream-event"
    severity = "error"
    fix = "safe"
    names = tuple(f"torch.cuda.{n}" for n in ("Stream", "Event", "stream", "current_stream", "default_stream",
                                              "StreamContext", "set_stream", "ExternalStream", "graph", "CUDAGraph",
                                              "make_graphed_callables"))
    advice = {"graph": "CUDA graphs have no portable form; guard them with `torchport.current().type`",
              "CUDAGraph": "CUDA graphs have no portable form; guard them with `torchport.current().type`"}
    summary = "Finds CUDA streams, events and graphs: `torch.cuda.Stream()`, `Event()`, `stream(s)`, ..."
    why = "Streams and events are per-backend objects; the CUDA ones cannot be created without CUDA."
    example = "import torch\n\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\n"
    use_instead = ("import torchport\n\ns = torchport.compat.Stream()\n"
                   "with torchport.compat.stream(s):\n    pass\n")
    fix_notes = ("Safe: `Stream`, `Event`, `stream`, `StreamContext`, `set_stream`, `current_stream`, "
                 "`default_stream` and `ExternalStream` become `torchport.compat.<name>(...)` -- torch's own on CUDA, "
                 "the selected backend's elsewhere (a stream set or entered is current on the target), and on the CPU "
                 "the shim's stand-ins (work is synchronous; events time with the host clock; an external CUDA "
                 "stream is refused in one line), as `torchport run` gives them. CUDA graphs (`CUDAGraph`, `graph`, `make_graphed_callables`, "
                 "`graph_pool_handle`, `is_current_stream_capturing`) become `torchport.compat.<name>`: the backend's "
                 "graph API where it has one, else the host capture-and-replay (`shim/_graphs.py`).")
    after_fix = ("redirected to runtime: `Stream`, `Event`, `stream`, `StreamContext`, `set_stream`, "
                 "`current_stream`, `default_stream`, `ExternalStream` and the CUDA graph calls (`CUDAGraph`, `graph`, "
                 "`make_graphed_callables`, `graph_pool_handle`, `is_current_stream_capturing`) (`torchport.compat`)")


class CudaNvtx(_Mapped):
    code = "TP117"
    name = "cuda-nvtx"
    fix = "safe"
    names = ("torch.cuda.nvtx",)
    name_prefixes = ("torch.cuda.nvtx",)
    replacements = {"range": ("{torch}.profiler.record_function(", "unsafe")}
    summary = "Finds NVTX annotations: `torch.cuda.nvtx.range_push/pop`, `range`, `mark`."
    why = "NVTX markers exist only for NVIDIA tools and fail where CUDA is missing."
    example = 'import torch\n\ntorch.cuda.nvtx.range_push("forward")\ntorch.cuda.nvtx.range_pop()\n'
    use_instead = 'import torchport\n\ntorchport.compat.nvtx.range_push("forward")\ntorchport.compat.nvtx.range_pop()\n'
    fix_notes = ("Safe: every call becomes `torchport.compat.nvtx.<name>(...)`, what `torchport run` does: "
                 "`torch.profiler.record_function` ranges, which show up in the torch profiler (and in Nsight through "
                 "its NVTX bridge) on every backend, with NVTX's depths and range ids. With `--emit torch`, "
                 "`nvtx.range(name)` becomes `torch.profiler.record_function(name)` (unsafe: it returns no depth).")
    after_fix = "redirected to runtime: every call (`torchport.compat.nvtx`)"

    def on_reference(self, ctx, node, qualname: str) -> None:
        if qualname != "torch.cuda.nvtx":
            super().on_reference(ctx, node, qualname)


_CUDA_KNOBS = {
    "torch.backends.cudnn.benchmark": "cudnn_benchmark",
    "torch.backends.cudnn.deterministic": "cudnn_deterministic",
    "torch.backends.cudnn.allow_tf32": "cudnn_allow_tf32",
    "torch.backends.cuda.matmul.allow_tf32": "matmul_allow_tf32",
}


class CudnnKnob(Rule):
    code = "TP120"
    name = "cudnn-knob"
    severity = "info"
    fix = "safe"
    names = ("torch.backends.cudnn", "torch.backends.cuda")
    name_prefixes = ("torch.backends.cudnn.", "torch.backends.cuda.")
    assignments = tuple(_CUDA_KNOBS)
    needles = ("cuda", "cudnn")   # `torch.backends.cudnn.benchmark = True` alone holds no "cuda"
    summary = "Finds `torch.backends.cudnn.*` / `torch.backends.cuda.*` settings (benchmark, deterministic, TF32)."
    why = ("The settings are harmless elsewhere but do nothing there: a run that relied on "
           "`cudnn.deterministic = True` for reproducibility is not deterministic on an NPU; and backend tuning "
           "scattered through a script is how `if is_npu:` branches start.")
    example = "import torch\n\ntorch.backends.cudnn.benchmark = True\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
    use_instead = ("import torchport\n\ntorchport.tune(cudnn_benchmark=True)\n"
                   "torchport.tune(matmul_allow_tf32=True)\n")
    fix_notes = ("Safe: assignments to `cudnn.benchmark`, `cudnn.deterministic`, `cudnn.allow_tf32` and "
                 "`cuda.matmul.allow_tf32` become `torchport.tune(<knob>=<value>)`: the cuda backend record sets "
                 "exactly that attribute, every other backend ignores it (see TP606 for the NPU knobs). "
                 "For reproducibility on every backend add `torch.use_deterministic_algorithms(True)`; for fast "
                 "fp32 matmuls everywhere `torch.set_float32_matmul_precision(\"high\")`. Reads are reported only.")
    after_fix = ("fixed: the assignments; redirected to runtime: the `torch.backends.cuda` calls that reach the CUDA "
                 "runtime (`cublas_workspace_size`, `cublaslt_workspace_size`, `blas_workspace_size`, "
                 "`can_use_cudnn_attention`) and `cufft_plan_cache` (`torchport.compat.backends.cuda`); reported only "
                 "-- harmless because reading `torch.backends.cudnn.*` and the SDPA / matmul flags works on every "
                 "backend (under `run` alike)")

    _HINTS = {"deterministic": "use `torch.use_deterministic_algorithms(True)` (all backends)",
              "allow_tf32": 'use `torch.set_float32_matmul_precision("high")` (all backends)',
              "benchmark": "no portable equivalent; it has no effect off CUDA"}

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        path = qualname[len("torch."):]   # torch.backends.cuda.cublas_workspace_size -> backends.cuda....
        if compat_served(path) and call_args_plain(node):
            ctx.report(self, node, f"`{qualname}` reaches the CUDA runtime; use `torchport.compat.{path}(...)`, what "
                                   "`torchport run` does", fix=lambda n: compat_call(ctx, path, n))
            return
        self.on_reference(ctx, node.func, qualname)

    def on_reference(self, ctx, node, qualname: str) -> None:
        target = compat_reference(qualname)
        if target is not None:   # torch.backends.cuda.cufft_plan_cache: the stand-in `torchport run` gives
            ctx.report(self, node, f"`{qualname}` reaches the CUDA runtime; use `torchport.compat.{''.join(target)}`, "
                                   "what `torchport run` gives", fix=compat_reference_fix(ctx, *target))
            return
        hint = self._HINTS.get(_short(qualname), "it only affects CUDA")
        ctx.report(self, node, f"`{qualname}` is a CUDA-only setting; {hint}")

    def on_assign(self, ctx, node: cst.Assign, qualname: str) -> None:
        knob = _CUDA_KNOBS[qualname]
        if ctx.emit_torch:   # torch has no backend-neutral knob; this one is harmless off CUDA: it stays
            hint = self._HINTS.get(_short(qualname), "it only affects CUDA")
            ctx.claim(node.targets[0].target)
            ctx.report(self, node, f"`{qualname}` is a CUDA-only setting (kept by --emit torch); {hint}")
            return
        report_tune_assign(self, ctx, node, knob, f"`{qualname}` is a CUDA-only setting; use `torchport.tune({knob}=...)`")


class CudaVisibleDevices(Rule):
    code = "TP130"
    name = "cuda-visible-devices"
    strings = ("CUDA_VISIBLE_DEVICES",)
    needles = ("CUDA_VISIBLE_DEVICES",)
    summary = "Finds `CUDA_VISIBLE_DEVICES` read or set from Python."
    why = ("Each backend has its own variable (`ASCEND_RT_VISIBLE_DEVICES` on Ascend, `ZE_AFFINITY_MASK` on "
           "Intel): setting the CUDA one restricts nothing elsewhere.")
    example = 'import os\n\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n'
    use_instead = ('import os\nimport torchport\n\nenv = torchport.current().backend.visible_devices_env\n'
                   'if env:\n    os.environ[env] = "0,1"\n')
    fix_notes = "No fix: choose devices with the launcher (torchrun) or `TORCHPORT_DEVICE`, or use the code above."
    after_fix = ("reported only -- harmless because setting or reading an environment variable works everywhere "
                 "(`torchport run` leaves it alike), and it restricts CUDA only")

    def on_string(self, ctx, node, value: str) -> None:
        ctx.report(self, node, "`CUDA_VISIBLE_DEVICES` restricts CUDA only; use "
                               "`torchport.current().backend.visible_devices_env`")


class CudaApiOther(Rule):
    code = "TP199"
    name = "cuda-api-other"
    names = ("torch.cuda",)
    name_prefixes = ("torch.cuda.",)
    summary = "Finds any other use of `torch.cuda` (the catch-all after TP110-TP117)."
    why = "Anything under `torch.cuda` assumes an NVIDIA GPU; this rule makes sure none of it goes unreported."
    example = "import torch\n\ntorch.cuda.ipc_collect()\n"
    use_instead = "import torchport\n\ntorchport.compat.ipc_collect()\n"
    fix_notes = ("Safe for a call `torchport.compat` serves (e.g. `torch.cuda.ipc_collect()`, "
                 "`torch.cuda.memory._record_memory_history()`, `torch.cuda.utilization()`; a refused one such as "
                 "`torch.cuda.temperature()` raises the same one line as under `run`): it becomes "
                 "`torchport.compat.<name>(...)`, what `torchport run` does; so does a reference to a served "
                 "function or value (`@torch.cuda.amp.custom_bwd`, `torch.cuda.default_generators[0]`). Anything "
                 "else (classes in annotations and `isinstance`, the harmless names): no fix -- look up the "
                 "selected backend's module with `torchport.current().module`.")
    after_fix = ("redirected to runtime: every call and function or value reference `torchport.compat` serves -- each "
                 "name docs/shim.md's CUDA-surface table does not call harmless; reported only -- harmless because "
                 "`torchport run` leaves the rest alike (the table's harmless names: build queries, exception "
                 "classes such as `torch.cuda.OutOfMemoryError`, types)")
    fix = "safe"

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        short = qualname[len("torch.cuda."):]
        if compat_served(short) and call_args_plain(node):
            note = COMPAT_NOTE if ctx.emit_torch else ""
            ctx.report(self, node, f"`{qualname}` is CUDA-only; use `torchport.compat.{short}(...)`, what "
                                   f"`torchport run` does{note}", fix=lambda n: compat_call(ctx, short, n))
            return
        self.on_reference(ctx, node.func, qualname)

    def on_reference(self, ctx, node, qualname: str) -> None:
        target = compat_reference(qualname)
        if target is not None:   # a served function or value: point it at what `torchport run` gives
            ctx.report(self, node, f"`{qualname}` is CUDA-only; use `torchport.compat.{''.join(target)}`, what "
                                   "`torchport run` gives", fix=compat_reference_fix(ctx, *target))
            return
        ctx.report(self, node, f"`{qualname}` is CUDA-only; use the selected backend's module "
                               "`torchport.current().module`")
