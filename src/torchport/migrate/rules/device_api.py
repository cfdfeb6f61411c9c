"""TP110-TP199: the ``torch.cuda.*`` runtime API, cuDNN knobs and CUDA_VISIBLE_DEVICES.

Each rule owns a group of ``torch.cuda`` names. Where torchport or torch core has a
device-generic equivalent the call is rewritten; the rest are reported with what to
write instead. ``TP199`` catches every other ``torch.cuda.*`` use, so nothing under
``torch.cuda`` goes unreported.
"""

from __future__ import annotations

import libcst as cst

from torchport.migrate.rules.base import EQ, Rule, call_args_plain, keyword, positional, report_tune_assign

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
    ``advice`` maps short names without a rewrite to what to write instead.
    """

    replacements: dict[str, tuple[str, str]] = {}
    advice: dict[str, str] = {}

    def on_reference(self, ctx, node, qualname: str) -> None:
        hint = self.advice.get(_short(qualname), "see `torchport explain " + self.code + "`")
        ctx.report(self, node, f"`{qualname}` is CUDA-only; {hint}")

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        short = _short(qualname)
        rep = self.replacements.get(short)
        if rep is None or not call_args_plain(node):
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

        if not keeps_args and node.args:
            safety = "unsafe"
        shown = template.format(tp="torchport", torch="torch", q='"')
        shown = shown + "...)" if keeps_args else shown
        note = " (its arguments are dropped)" if not keeps_args and node.args else ""
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
        "get_device_name": "log `torchport.current()` or use `torchport doctor`",
        "get_device_properties": "use `torchport.current().module.get_device_properties(...)` where the backend has it",
        "get_device_capability": "branch on `torchport.current().backend.amp.usable(\"bf16\")` instead of compute capability",
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
                 "Names, properties and capabilities are reported only.")


class CudaSetDevice(_Mapped):
    code = "TP112"
    name = "cuda-set-device"
    severity = "error"
    fix = "safe"
    names = ("torch.cuda.set_device", "torch.cuda.device")
    advice = {"device": "select the device once with `torchport.select_device(...)` (or `TORCHPORT_DEVICE`)"}
    summary = "Finds `torch.cuda.set_device(i)` and the `torch.cuda.device(i)` context manager."
    why = "Selecting a CUDA device raises on a host without CUDA; the NPU has its own `torch.npu.set_device`."
    example = "import torch\n\n\ndef worker(gpu):\n    torch.cuda.set_device(gpu)\n"
    use_instead = "import torchport\n\n\ndef worker(gpu):\n    torchport.select_device(index=gpu)\n"
    fix_notes = ("Safe: becomes `torchport.select_device(index=i)`: device `i` of the selected backend becomes "
                 "the current device of its module (as `set_device` did) *and* what `torchport.device()` and "
                 "`torchport.wrap_ddp(model)` use afterwards -- so an `mp.spawn` worker's `.cuda()` and "
                 "`DistributedDataParallel(model, device_ids=[gpu])` stay on device `i` once fixed. On the CPU the "
                 "index is ignored. A device that is not an integer index known from the file (see TP109) goes to "
                 "`torchport.current().module.set_device(...)`. `torchport.init_distributed()` already does this "
                 "for torchrun jobs.")

    replacements = {"set_device": ("{tp}.current().module.set_device(", "safe")}

    def on_call(self, ctx, node: cst.Call, qualname: str) -> None:
        arg = positional(node, 0) or keyword(node, "device")
        if qualname != "torch.cuda.set_device" or arg is None or len(node.args) != 1 or not call_args_plain(node):
            super().on_call(ctx, node, qualname)
            return

        def later() -> None:
            if ctx.int_device(arg.value) is None:  # a device object or string: the backend module's own call
                super(CudaSetDevice, self).on_call(ctx, node, qualname)
                return
            ctx.report(self, node, "`torch.cuda.set_device` is CUDA-only; use `torchport.select_device(index=i)`",
                       fix=lambda n: cst.Call(func=ctx.expr(f"{ctx.tp}.select_device"), args=[cst.Arg(
                           n.args[0].value, keyword=cst.Name("index"), equal=EQ)]))

        ctx.defer(later)


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
    fix_notes = ("Safe: becomes `torchport.synchronize()` (a no-op on CPU). Unsafe when the call passed a device "
                 "(it is dropped). `torch.accelerator.synchronize()` is the torch-core spelling on torch >= 2.6.")


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
    advice = {"memory_summary": "print `torchport.memory_stats()`",
              "mem_get_info": "use `torchport.current().module.mem_get_info()` where the backend has it"}
    summary = "Finds the CUDA caching-allocator API: `empty_cache`, `memory_allocated`, `max_memory_allocated`, ..."
    why = ("Memory statistics read the CUDA allocator only: on an NPU they report 0 (or raise), so memory logs and "
           "out-of-memory guards stop working.")
    example = "import torch\n\ntorch.cuda.reset_peak_memory_stats()\npeak = torch.cuda.max_memory_allocated()\n"
    use_instead = ('import torchport\n\ntorchport.reset_peak_memory()\n'
                   'peak = (torchport.memory_stats()["peak_bytes"] or 0)\n')
    fix_notes = ("Safe: `empty_cache()`, `reset_peak_memory_stats()`, `memory_allocated()`, "
                 "`max_memory_allocated()`, `memory_reserved()` map to `torchport.empty_cache()`, "
                 "`torchport.reset_peak_memory()` and `torchport.memory_stats()` (0 on CPU). Unsafe when the "
                 "call passed a device (it is dropped). The rest are reported only.")


class CudaRngApi(_Mapped):
    code = "TP115"
    name = "cuda-rng-api"
    fix = "unsafe"
    names = tuple(f"torch.cuda.{n}" for n in ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
                                              "get_rng_state", "get_rng_state_all", "set_rng_state",
                                              "set_rng_state_all"))
    replacements = {"manual_seed": ("{torch}.manual_seed(", "unsafe"),
                    "manual_seed_all": ("{torch}.manual_seed(", "unsafe")}
    advice = {n: "save and restore `torch.get_rng_state()` plus `torchport.current().module.get_rng_state()` "
                 "when `torchport.current().is_accelerator`"
              for n in ("get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all")}
    summary = "Finds CUDA random-generator calls: `torch.cuda.manual_seed(_all)`, `get/set_rng_state`, ..."
    why = "They seed or snapshot only CUDA generators; on an NPU the device generator stays unseeded."
    example = "import torch\n\ntorch.cuda.manual_seed_all(seed)\n"
    use_instead = "import torch\n\ntorch.manual_seed(seed)\n"
    fix_notes = ("Unsafe: `manual_seed(_all)(s)` becomes `torch.manual_seed(s)`, which seeds every device "
                 "(CUDA, NPU, XPU, MPS) and also re-seeds the CPU generator. `torchport.seed_everything(seed)` "
                 "seeds Python, NumPy and torch in one call.")


class CudaStreamEvent(_Mapped):
    code = "TP116"
    name = "cuda-stream-event"
    severity = "error"
    fix = "safe"
    names = tuple(f"torch.cuda.{n}" for n in ("Stream", "Event", "stream", "current_stream", "default_stream",
                                              "StreamContext", "set_stream", "ExternalStream", "graph", "CUDAGraph",
                                              "make_graphed_callables"))
    replacements = {n: ("{tp}.current().module.%s(" % n, "safe")
                    for n in ("Stream", "Event", "stream", "current_stream", "StreamContext")}
    advice = {"graph": "CUDA graphs have no portable form; guard them with `torchport.current().type`",
              "CUDAGraph": "CUDA graphs have no portable form; guard them with `torchport.current().type`"}
    summary = "Finds CUDA streams, events and graphs: `torch.cuda.Stream()`, `Event()`, `stream(s)`, ..."
    why = "Streams and events are per-backend objects; the CUDA ones cannot be created without CUDA."
    example = "import torch\n\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\n"
    use_instead = ("import torchport\n\ns = torchport.current().module.Stream()\n"
                   "with torchport.current().module.stream(s):\n    pass\n")
    fix_notes = ("Safe (on a CUDA machine the selected module is `torch.cuda`): `Stream`, `Event`, `stream`, "
                 "`current_stream` and `StreamContext` are taken from the "
                 "selected backend's module (on CPU these are stubs: no timing in `Event.elapsed_time`). "
                 "Graphs, external streams and `set_stream` are reported only.")


class CudaNvtx(_Mapped):
    code = "TP117"
    name = "cuda-nvtx"
    fix = "unsafe"
    names = ("torch.cuda.nvtx",)
    name_prefixes = ("torch.cuda.nvtx",)
    replacements = {"range": ("{torch}.profiler.record_function(", "unsafe")}
    advice = {"range_push": "use `with torch.profiler.record_function(name):` around the region",
              "range_pop": "use `with torch.profiler.record_function(name):` around the region",
              "mark": "use `torch.profiler.record_function(name)`"}
    summary = "Finds NVTX annotations: `torch.cuda.nvtx.range_push/pop`, `range`, `mark`."
    why = "NVTX markers exist only for NVIDIA tools and fail where CUDA is missing."
    example = 'import torch\n\nwith torch.cuda.nvtx.range("forward"):\n    pass\n'
    use_instead = 'import torch\n\nwith torch.profiler.record_function("forward"):\n    pass\n'
    fix_notes = ("Unsafe: `nvtx.range(name)` becomes `torch.profiler.record_function(name)`, which shows up in the "
                 "torch profiler (and in Nsight through its NVTX bridge) on every backend.")

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

    _HINTS = {"deterministic": "use `torch.use_deterministic_algorithms(True)` (all backends)",
              "allow_tf32": 'use `torch.set_float32_matmul_precision("high")` (all backends)',
              "benchmark": "no portable equivalent; it has no effect off CUDA"}

    def on_reference(self, ctx, node, qualname: str) -> None:
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
    example = "import torch\n\narch = torch.cuda.get_gencode_flags()\n"
    use_instead = "import torchport\n\nmod = torchport.current().module  # the selected backend's device module\n"
    fix_notes = "No fix: look up the selected backend's module with `torchport.current().module`."

    def on_reference(self, ctx, node, qualname: str) -> None:
        ctx.report(self, node, f"`{qualname}` is CUDA-only; use the selected backend's module "
                               "`torchport.current().module`")
