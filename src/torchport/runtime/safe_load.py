"""Loading checkpoints from elsewhere without running them: a restricted unpickler for DCP's ``.metadata`` and
a DCP storage reader that reads every item of a sharded checkpoint as data.

A checkpoint is data from elsewhere (see docs/security.md). ``torch.load(weights_only=True)`` keeps a ``.pt``
file from running code, but ``torch.distributed.checkpoint`` (DCP) does not: its ``FileSystemReader``
unpickles ``.metadata`` with plain :func:`pickle.load` and its default planner reads every non-tensor item
(an optimizer's ``param_groups.0.lr``) with ``torch.load(weights_only=False)``. PyTorch treats DCP as a
trusted-environment feature (its SECURITY.md), so torchport reads DCP through :func:`dcp_reader`:

* ``.metadata`` goes through :class:`RestrictedUnpickler`, whose allow-list is :data:`ALLOWED_GLOBALS`
  (DCP's metadata dataclasses, ``torch.Size``, paths) plus torch's dtypes, layouts and memory formats --
  nothing that can call anything else;
* each non-tensor item is loaded with ``weights_only=True`` before DCP's planner sees it;
* each shard file a ``.metadata`` names must be a plain file name inside the checkpoint directory (no
  ``../``, no sub-directory, no symlink leading out of it).

A refused file raises :class:`~torchport.runtime.checkpoint.CheckpointRefusedError` (exit 5) naming the file
and the forbidden global, before anything in it was executed. ``trust=True`` (``--trust-checkpoint``) reads
with torch's own reader: for checkpoints you made yourself with something other than torchport.

Example::

    import torch.distributed.checkpoint as dcp
    from torchport.runtime.safe_load import dcp_reader

    dcp.load(state, storage_reader=dcp_reader("runs/a/checkpoints/step-000000120"))
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

from torchport.runtime.checkpoint import CheckpointError, CheckpointRefusedError

__all__ = ["ALLOWED_GLOBALS", "RestrictedUnpickler", "restricted_loads", "load_bytes_item", "dcp_reader",
           "refusal"]

_DCP_META = "torch.distributed.checkpoint.metadata"

#: ``(module, name)`` of every global a DCP ``.metadata`` pickle may import (what torch 2.x writes), besides
#: torch's dtypes/layouts/memory formats (``torch.float32``, ``torch.strided``, ...; see :func:`_torch_constant`).
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset({
    (_DCP_META, "Metadata"), (_DCP_META, "MetadataIndex"), (_DCP_META, "StorageMeta"),
    (_DCP_META, "TensorStorageMetadata"), (_DCP_META, "BytesStorageMetadata"), (_DCP_META, "ChunkStorageMetadata"),
    (_DCP_META, "TensorProperties"), (_DCP_META, "_MEM_FORMAT_ENCODING"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.distributed.checkpoint._extension", "StreamTransformExtension"),
    ("torch", "Size"), ("torch", "device"),
    ("torch.serialization", "_get_layout"),            # a name -> torch.layout lookup, nothing else
    ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath"),
    ("pathlib", "PureWindowsPath"), ("pathlib", "Path"),
    ("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
})


def _torch_constant(module: str, name: str) -> Any:
    """``torch.<name>`` when it is a dtype, layout or memory format (pickled by name), else None."""
    if module != "torch":
        return None
    import torch

    value = getattr(torch, name, None)
    return value if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)) else None


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that imports only :data:`ALLOWED_GLOBALS` and torch's dtypes/layouts/memory formats; any
    other global raises :class:`~torchport.runtime.checkpoint.CheckpointRefusedError` before it is imported.

    Args:
        file: the binary stream.
        name: the file's name, for the message.
    """

    def __init__(self, file, *, name: str) -> None:
        super().__init__(file)
        self._name = name

    def find_class(self, module: str, name: str) -> Any:
        constant = _torch_constant(module, name)
        if constant is not None:
            return constant
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise CheckpointRefusedError(refusal(self._name, f"holds the blocked global {module}.{name}"))

    def persistent_load(self, pid: Any) -> Any:
        raise CheckpointRefusedError(refusal(self._name, "holds a persistent reference (not DCP metadata)"))


def refusal(name: Any, what: str) -> str:
    """:func:`torchport.runtime.checkpoint.refusal_line` (one wording for every refused file)."""
    from torchport.runtime.checkpoint import refusal_line

    return refusal_line(name, what)


def restricted_loads(data: bytes, *, name: str) -> Any:
    """Unpickle ``data`` (a DCP ``.metadata``) through :class:`RestrictedUnpickler`.

    Raises:
        CheckpointRefusedError: a global outside the allow-list (nothing was executed).
        CheckpointError: empty, truncated or not a pickle.
    """
    if not data:
        raise CheckpointError(f"checkpoint metadata {name!r} is empty (0 bytes): its save did not finish; "
                              "use an earlier checkpoint (--resume auto picks the newest complete one)")
    try:
        return RestrictedUnpickler(io.BytesIO(data), name=name).load()
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - any unpickling failure of a damaged file is one line
        raise CheckpointError(f"checkpoint metadata {name!r} is damaged ({type(exc).__name__}: "
                              f"{str(exc)[:120]}); use an earlier checkpoint") from None


def load_bytes_item(value: io.BytesIO, *, name: str, trust: bool = False) -> Any:
    """A DCP non-tensor item (``torch.save`` bytes), loaded with ``weights_only=True`` unless ``trust``."""
    from torchport.runtime.checkpoint import safe_torch_load

    return safe_torch_load(value, name=name, trust=trust)


class _SafeBytesPlanner:
    """DCP's load planner with its ``load_bytes`` fed only data already loaded with ``weights_only=True``
    (re-serialised: what reaches the planner's own ``torch.load`` holds tensors and plain data only)."""

    def __init__(self, planner, reader) -> None:
        self._planner = planner
        self._reader = reader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._planner, name)

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        import torch

        info = self._reader.storage_data.get(read_item.storage_index)
        where = _join(self._reader.display or self._reader.path, getattr(info, "relative_path", "?"))
        obj = load_bytes_item(value, name=f"{where} ({read_item.dest_index.fqn})")
        buf = io.BytesIO()
        torch.save(obj, buf)
        buf.seek(0)
        self._planner.load_bytes(read_item, buf)


def _join(base: Any, name: str) -> str:
    return f"{str(base).rstrip('/')}/{name}"


class Fatal(BaseException):
    """Carries a :class:`CheckpointError` through DCP's ``except Exception`` (which would log it with a traceback
    and retry with rank-local metadata) to DCP's own per-rank error collection; :func:`torchport.runtime.dcp.
    _dcp_call` unwraps it into the one line."""

    def __init__(self, error: CheckpointError) -> None:
        super().__init__(error)
        self.error = error


class _SafeReaderMixin:
    """What makes a DCP reader safe (mixed into torch's FileSystemReader and FsspecReader)."""

    display: str = ""

    def read_metadata(self, *args: Any, **kwargs: Any):
        from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

        path = self._get_metadata_path(kwargs.get("rank"))
        name = f"{self.display or self.path}/{os.path.basename(str(path))}"
        try:
            try:
                with self.fs.create_stream(path, "rb") as fh:
                    data = fh.read()
            except FileNotFoundError:
                raise CheckpointError(f"checkpoint {self.display or self.path} has no "
                                      f"{os.path.basename(str(path))}: it is not a complete DCP checkpoint; use an "
                                      "earlier one (--resume auto picks the newest complete one)") from None
            metadata = restricted_loads(data, name=name)
            if not isinstance(metadata, Metadata) or not isinstance(getattr(metadata, "storage_data", None), dict):
                raise CheckpointError(f"checkpoint metadata {name!r} holds a {type(metadata).__name__}, not DCP "
                                      "metadata; use an earlier checkpoint")
        except CheckpointError as exc:
            raise Fatal(exc) from None
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(self, metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        try:
            self._confine()
        except CheckpointError as exc:
            raise Fatal(exc) from None

    def _confine(self) -> None:
        from torchport.paths import inside, plain_name

        for info in self.storage_data.values():
            rel = getattr(info, "relative_path", "")
            if not plain_name(rel):
                raise CheckpointRefusedError(refusal(f"{self.display or self.path}/.metadata",
                                                     f"names the shard file {rel!r} outside its directory"))
        if isinstance(self.path, (str, os.PathLike)) and self._local:
            for rel in {str(i.relative_path) for i in self.storage_data.values()}:
                if not inside(Path(self.path) / rel, self.path):
                    real = os.path.realpath(Path(self.path) / rel)
                    raise CheckpointRefusedError(refusal(Path(self.path) / rel,
                                                         f"is a symlink leading out of the checkpoint ({real})"))

    def read_data(self, plan, planner):
        return super().read_data(plan, _SafeBytesPlanner(planner, self))


def dcp_reader(path: Any, *, trust: bool = False):
    """The DCP storage reader torchport loads ``path`` (a checkpoint directory, or an ``s3://`` / ``obs://``
    prefix) with: the safe one unless ``trust`` (``--trust-checkpoint``)."""
    from torch.distributed.checkpoint import FileSystemReader

    from torchport.storage import fs

    if not fs.remote(path):
        cls = FileSystemReader if trust else _local_reader_class()
        reader = cls(str(path))
        reader.display = str(path)
        return reader
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

    from torchport.runtime.dcp import _on_store

    reader = _on_store(FsspecReader if trust else _remote_reader_class(), str(path))
    reader.display = str(path)
    return reader


_CLASSES: dict[str, type] = {}


def _local_reader_class() -> type:
    if "local" not in _CLASSES:
        from torch.distributed.checkpoint import FileSystemReader

        _CLASSES["local"] = type("SafeFileSystemReader", (_SafeReaderMixin, FileSystemReader), {"_local": True})
    return _CLASSES["local"]


def _remote_reader_class() -> type:
    if "remote" not in _CLASSES:
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

        _CLASSES["remote"] = type("SafeFsspecReader", (_SafeReaderMixin, FsspecReader), {"_local": False})
    return _CLASSES["remote"]
