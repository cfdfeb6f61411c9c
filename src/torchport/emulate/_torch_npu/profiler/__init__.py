"""``torch_npu.profiler`` (emulated): torch_npu's profiler API over ``torch.profiler``.

The enums, ``schedule``, ``_ExperimentalConfig`` and ``tensorboard_trace_handler`` have
torch_npu's names and signatures; traces are torch's Chrome/Kineto JSON (``*.pt.trace.json``),
written where torch_npu would put its ``*_ascend_pt`` folder, and open in the same viewers
(TensorBoard's profiler plugin, Perfetto, chrome://tracing). CANN-only data (AI Core
metrics, L2 cache, msprof_tx) is accepted and not collected.
"""

import enum
import json
import os
import socket
import warnings
from typing import Any, Callable, Iterable, Optional

import torch.profiler as _tp

from . import _ascend_output

__torchport_emulated__ = True
__all__ = ["profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler", "schedule",
           "ProfilerAction", "_ExperimentalConfig", "supported_profiler_level", "supported_ai_core_metrics",
           "supported_export_type", "ProfilerLevel", "AiCMetrics", "ExportType", "HostSystem"]

ProfilerAction = _tp.ProfilerAction


class ProfilerActivity(enum.Enum):
    """torch_npu's activities: CPU and NPU (device work is host work on the emulator)."""

    CPU = 0
    NPU = 1


def supported_activities() -> set:
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


class ProfilerLevel:
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"
    Level_none = "Level_none"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Db = "db"
    Text = "text"


class HostSystem:
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"


def supported_profiler_level() -> set:
    return {ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2, ProfilerLevel.Level_none}


def supported_ai_core_metrics() -> set:
    return {v for k, v in vars(AiCMetrics).items() if not k.startswith("_")}


def supported_export_type() -> set:
    return {ExportType.Db, ExportType.Text}


class _ExperimentalConfig:
    """torch_npu's experimental profiler settings (recorded; the CANN-side ones collect nothing here)."""

    def __init__(self, profiler_level: int = ProfilerLevel.Level0, aic_metrics: int = AiCMetrics.PipeUtilization,
                 l2_cache: bool = False, msprof_tx: bool = False, mstx: bool = False,
                 data_simplification: bool = True, record_op_args: bool = False, op_attr: bool = False,
                 gc_detect_threshold: Optional[float] = None, export_type=ExportType.Text,
                 host_sys: Optional[list] = None, mstx_domain_include: Optional[list] = None,
                 mstx_domain_exclude: Optional[list] = None, sys_io: bool = False,
                 sys_interconnection: bool = False):
        if profiler_level not in supported_profiler_level():  # torch_npu warns and falls back, it does not raise
            warnings.warn("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
            profiler_level = ProfilerLevel.Level0
        self._profiler_level = profiler_level
        self._aic_metrics = aic_metrics
        self._l2_cache = l2_cache
        self._msprof_tx = msprof_tx
        self._mstx = mstx
        self._data_simplification = data_simplification
        self.record_op_args = record_op_args
        self._op_attr = op_attr
        self._gc_detect_threshold = gc_detect_threshold
        self._export_type = [export_type] if isinstance(export_type, str) else list(export_type)
        self._host_sys = list(host_sys or [])
        self._sys_io = sys_io
        self._sys_interconnection = sys_interconnection

    def __call__(self):
        return self


class schedule:  # noqa: N801 - torch_npu's name
    """torch_npu's ``Schedule`` (``skip_first``, ``wait``, ``warmup``, ``active``, ``repeat``)."""

    def __init__(self, *, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0) -> None:
        for name, v in (("wait", wait), ("active", active), ("warmup", warmup), ("repeat", repeat),
                        ("skip_first", skip_first)):
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"Invalid parameter {name}, which must be a non-negative integer.")
        if active < 1:
            raise ValueError("Invalid parameter active, which must be greater than 0.")
        self.wait, self.active, self.warmup, self.repeat = wait, active, warmup, repeat
        self.skip_first, self.skip_first_wait = skip_first, skip_first_wait
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about warmup=0; torch_npu does not
            self._fn = _tp.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
                                    skip_first_wait=skip_first_wait)

    def __call__(self, step: int):
        if step < 0:
            raise ValueError("Invalid parameter step, which must be not less than 0.")
        return self._fn(step)


def tensorboard_trace_handler(dir_name: Optional[str] = None, worker_name: Optional[str] = None,
                              analyse_flag: bool = True, async_mode: bool = False) -> Callable:
    """Write each trace into ``dir_name/<worker>_<time>_ascend_pt/<worker>.pt.trace.json`` (torch_npu's layout)."""
    dir_name = dir_name or _ascend_output.default_dir()
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler_fn(prof) -> None:
        _ascend_output.write_folder(prof, dir_name, worker)

    return handler_fn


def _torch_activities(activities: Optional[Iterable]) -> list:
    acts = set(activities) if activities else supported_activities()
    out = []
    for a in acts:
        if a in (ProfilerActivity.CPU, ProfilerActivity.NPU, _tp.ProfilerActivity.CPU):
            if _tp.ProfilerActivity.CPU not in out:
                out.append(_tp.ProfilerActivity.CPU)
        else:
            raise ValueError(f"Invalid profiler activity {a!r}: expected torch_npu.profiler.ProfilerActivity.CPU/NPU")
    return out


class _NpuProfileMixin:
    """What torch_npu's profilers add to torch's: the NPU activity flag, metadata, ``ASCEND_WORK_PATH``."""

    def _npu_setup(self, activities: Optional[Iterable]) -> None:
        self.npu_activity = activities is None or ProfilerActivity.NPU in set(activities)
        self.npu_metadata: dict = {}
        if os.environ.get("ASCEND_WORK_PATH"):
            os.makedirs(_ascend_output.default_dir(), exist_ok=True)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """torch's stacks file with device metrics read as host ones (device work is host work here);
        frames that took no time are left out, as in torch_npu's file."""
        if metric in ("self_npu_time_total", "self_cuda_time_total", "self_device_time_total"):
            metric = "self_cpu_time_total"
        super().export_stacks(path, metric)
        with open(path, encoding="utf-8") as fh:
            lines = [ln for ln in fh if ln.rsplit(" ", 1)[-1].strip().isdigit() and int(ln.rsplit(" ", 1)[-1]) > 0]
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(lines)

    def add_metadata(self, key: str, value: str) -> None:
        """Recorded into ``profiler_metadata.json`` of the output folder."""
        if not isinstance(key, str) or not isinstance(value, str):
            warnings.warn("The key and value of metadata must be str, skip it.")
            return
        self.npu_metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        """``value`` is a JSON string; recorded parsed, as torch_npu does."""
        try:
            self.npu_metadata[key] = json.loads(value)
        except (TypeError, ValueError):
            warnings.warn(f"The metadata value of key {key!r} is not valid JSON, skip it.")


class _KinetoProfile(_NpuProfileMixin, _tp._KinetoProfile):
    def __init__(self, *, activities=None, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config: Optional[_ExperimentalConfig] = None, custom_trace_id_callback=None):
        super().__init__(activities=_torch_activities(activities), record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack, with_flops=with_flops,
                         with_modules=with_modules)
        self.npu_experimental_config = experimental_config  # torch_npu settings (torch keeps its own attribute)
        self._npu_setup(activities)

    def stop(self) -> None:
        super().stop()
        self._raw_trace = None
        if os.environ.get("ASCEND_WORK_PATH"):  # torch_npu leaves the raw data there for offline analyse()
            folder = _ascend_output.folder_for(None, None)
            self._raw_trace = os.path.join(folder, _ascend_output.RAW_TRACE)
            super().export_chrome_trace(self._raw_trace)

    def export_chrome_trace(self, path: str) -> None:
        raw = getattr(self, "_raw_trace", None)
        if raw is None:
            return super().export_chrome_trace(path)
        import shutil

        shutil.copyfile(raw, path)  # torch saves a trace once; the raw copy is already on disk


class profile(_NpuProfileMixin, _tp.profile):  # noqa: N801 - torch_npu's name
    """``torch_npu.profiler.profile``: torch's profiler with torch_npu's arguments (NPU work is host work)."""

    def __init__(self, *, activities: Optional[Iterable] = None, schedule: Optional[Callable[[int], Any]] = None,
                 on_trace_ready: Optional[Callable[..., Any]] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Optional[_ExperimentalConfig] = None,
                 execution_trace_observer=None, custom_trace_id_callback=None, use_cuda: Optional[bool] = None):
        if experimental_config is not None and not isinstance(experimental_config, _ExperimentalConfig):
            raise RuntimeError("experimental_config must be a torch_npu.profiler._ExperimentalConfig")
        super().__init__(activities=_torch_activities(activities), schedule=schedule, on_trace_ready=on_trace_ready,
                         record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules)
        self.npu_experimental_config = experimental_config  # torch_npu settings (torch keeps its own attribute)
        self._npu_setup(activities)


from . import profiler  # noqa: E402,F401  (torch_npu.profiler.profiler.analyse)
