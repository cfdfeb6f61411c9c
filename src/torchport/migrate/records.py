"""The small records rules receive from the engine: where a string value sits, and a recognised device string.

A leaf module (no import at run time): :mod:`torchport.migrate.context` builds these and :mod:`torchport.migrate.rules.base`
re-exports them for the rules, so neither of those two imports the other at run time.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - annotations only: the records are built without LibCST imported here
    import libcst as cst

__all__ = ["Site", "DeviceString"]


@dataclasses.dataclass(frozen=True)
class Site:
    """Where a string value sits.

    Attributes:
        role: ``"arg"`` (call argument), ``"assign"``, ``"default"`` (parameter
            default), ``"compare"``, ``"return"``, ``"ifexp"``, ``"dict-value"``.
        keyword: the argument's keyword (``"device"``), for ``role == "arg"``.
        index: the positional index, for positional arguments.
        callee: the called function's qualified name, ``".name"`` for a method on a
            non-import receiver, or None.
        subject: for ``role == "compare"``, the source of the other operand (``"device.type"``).
    """

    role: str
    keyword: str | None = None
    index: int | None = None
    callee: str | None = None
    subject: str | None = None


@dataclasses.dataclass(frozen=True)
class DeviceString:
    """A string literal that names a device or collective backend.

    Attributes:
        value: the text, ``"cuda"``, ``"cuda:1"``, ``"npu:0"`` or ``"nccl"``; None for an f-string.
        device_type: ``"cuda"``, ``"npu"``, ``"xpu"``, ``"mps"``, or a collective: ``"nccl"``, ``"hccl"``, ``"xccl"``.
        index: the literal device index (``"cuda:1"`` -> 1), else None.
        index_expr: for ``f"cuda:{expr}"`` / ``"cuda:%d" % expr``, the expression node; else None.
    """

    value: str | None
    device_type: str
    index: int | None = None
    index_expr: cst.BaseExpression | None = None

    @property
    def plain(self) -> bool:
        """True for ``"cuda"`` with no index."""
        return self.index is None and self.index_expr is None
