"""``torch_npu.utils._path_manager`` (emulated): the path checks torch_npu's profiler tests call."""

import os
import shutil

__torchport_emulated__ = True
__all__ = ["PathManager"]


class PathManager:
    """Checked filesystem helpers (torch_npu's names); errors say which path and what is wrong."""

    @classmethod
    def check_directory_path_readable(cls, path: str) -> None:
        if not os.path.exists(path):
            raise RuntimeError(f"The path does not exist: {path}")
        if not os.access(path, os.R_OK):
            raise RuntimeError(f"The path permission check failed: {path} is not readable")

    @classmethod
    def check_directory_path_writeable(cls, path: str) -> None:
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise RuntimeError(f"The path permission check failed: {path} is not writable")

    @classmethod
    def make_dir_safety(cls, path: str) -> None:
        os.makedirs(path, mode=0o750, exist_ok=True)

    @classmethod
    def remove_path_safety(cls, path: str) -> None:
        if os.path.islink(path):
            raise RuntimeError(f"Invalid path is a soft chain: {path}")
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)

    @classmethod
    def remove_file_safety(cls, path: str) -> None:
        cls.remove_path_safety(path)
