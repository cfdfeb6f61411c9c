"""``torch_npu.profiler.profiler`` (emulated): offline ``analyse`` of raw profiling folders."""

import os

from torch_npu.profiler import _ascend_output

__torchport_emulated__ = True
__all__ = ["analyse"]


def analyse(profiler_path: str, max_process_number: int = os.cpu_count() // 2 or 1, export_type=None) -> None:
    """Parse every ``*_ascend_pt`` folder under ``profiler_path`` (or that folder itself) into
    ``ASCEND_PROFILER_OUTPUT/``. ``export_type`` ``"db"`` needs msprof: only ``"text"`` is written."""
    if not os.path.isdir(profiler_path):
        raise RuntimeError(f"torch_npu.profiler.analyse: {profiler_path} is not a directory; pass the folder that "
                           "holds the *_ascend_pt results")
    folders = [profiler_path] if profiler_path.rstrip("/").endswith("ascend_pt") else [
        os.path.join(profiler_path, d) for d in sorted(os.listdir(profiler_path)) if d.endswith("ascend_pt")]
    for folder in folders:
        if folder != profiler_path:
            _ascend_output._confined(folder, profiler_path)     # a result folder linked in from elsewhere
        _ascend_output.analyse_folder(folder)
