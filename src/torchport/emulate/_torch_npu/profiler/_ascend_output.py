"""torch_npu's profiler output folder, written from torch's Chrome trace (emulated NPU).

A torch_npu profile lands in ``<dir>/<worker>_<timestamp>_ascend_pt/`` with the parsed views under
``ASCEND_PROFILER_OUTPUT/``: ``trace_view.json`` (Chrome trace), ``operator_details.csv`` (host
operators), and -- with the NPU activity -- ``kernel_details.csv`` and ``step_trace_time.csv``; with
``profile_memory=True`` also ``operator_memory.csv`` and ``memory_record.csv``;
``profiler_metadata.json`` at the folder's root. The emulator writes the same files; device work is
host work, so the "kernels" are the operators that ran on npu tensors' host storage, and the CSVs
carry the leading columns of torch_npu's (the CANN-only columns are left out).
"""

from __future__ import annotations

import csv
import json
import os
import socket
import time
from collections import defaultdict
from typing import Any, Optional

__torchport_emulated__ = True
__all__ = ["folder_for", "write_folder", "analyse_folder", "OUTPUT_DIR"]

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
RAW_TRACE = "trace.pt.trace.json"


def default_dir() -> str:
    """``$ASCEND_WORK_PATH/profiling_data`` when set (torch_npu's rule), else the current directory."""
    work = os.environ.get("ASCEND_WORK_PATH")
    return os.path.join(work, "profiling_data") if work else "./"


def folder_for(dir_name: Optional[str], worker_name: Optional[str]) -> str:
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
    stamp = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
    folder = os.path.join(dir_name or default_dir(), f"{worker}_{stamp}_ascend_pt")
    os.makedirs(folder, exist_ok=True)
    return folder


def _confined(path: str, folder: str) -> None:
    """Refuse (one line) a ``path`` that is a symlink, or resolves outside ``folder``: a result folder from
    elsewhere is data, and writing through its links would write wherever they point."""
    from torchport.paths import inside

    if os.path.islink(path) or not inside(path, folder):
        real = os.path.realpath(path)
        raise RuntimeError(f"torch_npu.profiler: {path} is a symlink to {real}, outside the result folder {folder}; "
                           "refusing to read or write through it -- remove the link and analyse again")


def _write_atomic(path: str, write: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        write(fh)
    os.replace(tmp, path)


def _csv(path: str, header: list, rows: list) -> None:
    def write(fh: Any) -> None:
        out = csv.writer(fh)
        out.writerow(header)
        out.writerows(rows)

    _write_atomic(path, write)


def _events(trace_path: str) -> list:
    with open(trace_path, encoding="utf-8") as fh:
        data = json.load(fh)
    return data.get("traceEvents", []) if isinstance(data, dict) else list(data)


def analyse_folder(folder: str, *, npu: bool = True, memory: bool = True, metadata: Optional[dict] = None) -> str:
    """Write ``folder/ASCEND_PROFILER_OUTPUT/`` from the raw trace in ``folder``; returns that directory."""
    raw = [f for f in os.listdir(folder) if f.endswith(".pt.trace.json")]
    if not raw:
        raise FileNotFoundError(f"torch_npu.profiler: no trace (*.pt.trace.json) in {folder}: nothing to analyse")
    _confined(os.path.join(folder, raw[0]), folder)
    events = _events(os.path.join(folder, raw[0]))
    out = os.path.join(folder, OUTPUT_DIR)
    if os.path.lexists(out):
        _confined(out, folder)        # a symlinked output folder must not carry the results elsewhere
    os.makedirs(out, exist_ok=True)
    _write_atomic(os.path.join(out, "trace_view.json"), lambda fh: json.dump(events, fh))
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "operator")]
    agg: dict = defaultdict(lambda: [0, 0.0])
    for e in ops:
        key = (e.get("name", ""), str(e.get("args", {}).get("Input Dims", "")))
        agg[key][0] += 1
        agg[key][1] += float(e.get("dur", 0))
    _csv(os.path.join(out, "operator_details.csv"),
         ["Name", "Input Shapes", "Call Count", "Host Self Duration(us)", "Host Total Duration(us)",
          "Device Self Duration(us)", "Device Total Duration(us)"],
         [[name, shapes, n, round(total, 3), round(total, 3), 0, 0]
          for (name, shapes), (n, total) in sorted(agg.items())])
    if npu:
        steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
        _csv(os.path.join(out, "kernel_details.csv"),
             ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
              "Input Shapes"],
             [["", e.get("name", ""), e.get("name", ""), "HOST(emulated)", e.get("ts", 0), e.get("dur", 0), 0,
               str(e.get("args", {}).get("Input Dims", ""))]
              for e in ops if str(e.get("name", "")).startswith("aten::")])
        _csv(os.path.join(out, "task_time.csv"),
             ["kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)"],
             [[e.get("name", ""), "HOST(emulated)", 0, i, e.get("dur", 0)] for i, e in enumerate(ops)
              if str(e.get("name", "")).startswith("aten::")])
        _csv(os.path.join(out, "step_trace_time.csv"),
             ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage"],
             [[str(e["name"]).split("#")[-1], e.get("dur", 0), 0, 0, 0, 0, e.get("dur", 0)] for e in steps])
    if memory:
        mem = [e for e in events if e.get("name") == "[memory]"]
        _csv(os.path.join(out, "memory_record.csv"),
             ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Device Type"],
             [["PTA", e.get("ts", 0), round(e.get("args", {}).get("Total Allocated", 0) / 2**20, 4),
               round(e.get("args", {}).get("Total Reserved", 0) / 2**20, 4),
               f"{e.get('args', {}).get('Device Type', '')}:{e.get('args', {}).get('Device Id', '')}"] for e in mem])
        _csv(os.path.join(out, "operator_memory.csv"),
             ["Name", "Size(KB)", "Allocation Time(us)", "Device Type"],
             [["", round(e.get("args", {}).get("Bytes", 0) / 1024, 3), e.get("ts", 0),
               f"{e.get('args', {}).get('Device Type', '')}:{e.get('args', {}).get('Device Id', '')}"]
              for e in mem if e.get("args", {}).get("Bytes", 0) > 0])
    if metadata is not None:
        _write_atomic(os.path.join(folder, "profiler_metadata.json"), lambda fh: json.dump(metadata, fh))
    return out


def write_folder(prof: Any, dir_name: Optional[str], worker_name: Optional[str]) -> str:
    """Export ``prof`` as torch_npu does: the raw trace plus the parsed views; returns the folder."""
    folder = folder_for(dir_name, worker_name)
    prof.export_chrome_trace(os.path.join(folder, f"{worker_name or 'trace'}.pt.trace.json"))
    npu = getattr(prof, "npu_activity", True)
    memory = bool(getattr(prof, "profile_memory", False))
    analyse_folder(folder, npu=npu, memory=memory, metadata=dict(getattr(prof, "npu_metadata", {})))
    return folder
