"""A patch table that can be undone exactly.

Every attribute the shim replaces is one :class:`Patch`: the owner (a module or a
class), the attribute name, the object that was there before -- taken from the
owner's own ``__dict__``, so a class attribute that was *inherited* is recorded as
absent and deleted again on restore, and a ``staticmethod``/``classmethod`` wrapper
is put back as the very same object -- and the replacement.

Restoring puts back the identical original object (``is`` identity), in reverse
order, so patching the same attribute twice also unwinds correctly.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Patch", "PatchTable", "MISSING"]


class _Missing:
    """Marker: the owner had no attribute of its own under this name."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def own_attr(owner: Any, name: str) -> Any:
    """The attribute ``name`` from ``owner``'s own namespace, or :data:`MISSING`."""
    return vars(owner).get(name, MISSING)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Patch:
    """One replaced attribute.

    Attributes:
        owner: the module or class whose attribute was replaced.
        name: attribute name.
        original: what ``vars(owner)[name]`` held before (:data:`MISSING` if inherited/absent).
        replacement: what the shim put there.
        api: the public name it stands for in reports (``"torch.Tensor.to"``).
    """

    owner: Any
    name: str
    original: Any
    replacement: Any
    api: str

    @property
    def qualname(self) -> str:
        """``owner.name`` for messages."""
        owner = getattr(self.owner, "__qualname__", None) or getattr(self.owner, "__name__", repr(self.owner))
        mod = getattr(self.owner, "__module__", None)
        if mod and isinstance(self.owner, type):
            owner = f"{mod}.{owner}"
        return f"{owner}.{self.name}"


class PatchTable:
    """Ordered set of :class:`Patch` records: apply one at a time, restore all at once."""

    def __init__(self) -> None:
        self.patches: list[Patch] = []

    def apply(self, owner: Any, name: str, replacement: Any, *, api: str) -> Patch:
        """Replace ``owner.name`` with ``replacement`` and remember the original."""
        patch = Patch(owner=owner, name=name, original=own_attr(owner, name), replacement=replacement, api=api)
        setattr(owner, name, replacement)
        self.patches.append(patch)
        return patch

    def restore(self) -> list[str]:
        """Undo every patch in reverse order; return the names that could not be restored."""
        failed: list[str] = []
        while self.patches:
            patch = self.patches.pop()
            try:
                if patch.original is MISSING:
                    if patch.name in vars(patch.owner):
                        delattr(patch.owner, patch.name)
                else:
                    setattr(patch.owner, patch.name, patch.original)
            except Exception as exc:  # pragma: no cover - reported, never swallowed silently
                failed.append(f"{patch.qualname}: {exc}")
        return failed

    def __iter__(self):
        return iter(list(self.patches))

    def __len__(self) -> int:
        return len(self.patches)
