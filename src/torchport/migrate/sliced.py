"""The rules' context in a sliced pass (:mod:`torchport.migrate.fast`): whole-file state is watched.

A sliced module lacks the statements no rule can fire in. :class:`SlicedContext` is the usual
:class:`~torchport.migrate.context.FileContext` over it, except that what a blanked statement could change is
watched: reading a binding a blanked statement makes records the key (the next round keeps that statement),
iterating the bindings, reading import-use counts or walking ``ctx.module`` raises :class:`WholeFile` (the file
goes to the full pass). ``ctx.module.code`` is the whole file's text.
"""

from __future__ import annotations

import functools

from torchport.migrate.context import FileContext, _binding_key
from torchport.migrate.ruleset import DEVICE_INDEX_NAMES, RuleSet

__all__ = ["SlicedContext", "WholeFile"]


class _Watched(dict):
    """The file's bindings in a sliced pass: reading a key that a dropped statement binds, or iterating, tells
    the context that whole-file state was used (the engine writes through the base class)."""

    __slots__ = ("ctx",)

    def _used(self, key=None):
        if key is None:
            self.ctx.whole_file_used = True
        elif key in self.ctx.dropped_keys:
            self.ctx.needed_keys.add(key)

    def get(self, key, *a):
        self._used(key)
        return dict.get(self, key, *a)

    def __getitem__(self, key):
        self._used(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key):
        self._used(key)
        return dict.__contains__(self, key)

    def __iter__(self):
        self._used()
        return dict.__iter__(self)

    def __len__(self):
        self._used()
        return dict.__len__(self)

    def items(self):
        self._used()
        return dict.items(self)

    def values(self):
        self._used()
        return dict.values(self)

    def keys(self):
        self._used()
        return dict.keys(self)


class _Counted(_Watched):
    """Import-use counts: a blanked statement held uses too, so every read marks whole-file use."""

    __slots__ = ()

    def _used(self, key=None):
        self.ctx.whole_file_used = True


class _WatchedSet(set):
    """A set whose iteration marks whole-file use (membership tests are safe: see :func:`triggers`)."""

    __slots__ = ("ctx",)

    def __iter__(self):
        self.ctx.whole_file_used = True
        return set.__iter__(self)

    def __len__(self):
        self.ctx.whole_file_used = True
        return set.__len__(self)


class _ModuleView:
    """What ``ctx.module`` is for the rules in a sliced pass: ``code`` is the whole file's text, ``code_for_node``
    the sliced module's (kept nodes are unchanged); anything else (``visit``, ``body``) marks whole-file use."""

    def __init__(self, module, text: str, ctx: "SlicedContext") -> None:
        self._module, self._text, self._ctx = module, text, ctx

    @property
    def code(self) -> str:
        return self._text

    def code_for_node(self, node) -> str:
        return self._module.code_for_node(node)

    def __getattr__(self, name: str):
        self._ctx.whole_file_used = True
        return getattr(self._module, name)


class WholeFile(BaseException):
    """Raised (through the rule that asked, which must not see a partial answer) when a rule in a sliced pass
    uses whole-file state: the file goes to the full pass at once. A BaseException, so that a rule's own
    ``except Exception`` cannot swallow it."""


class SlicedContext(FileContext):
    """The rules' :class:`FileContext` over a sliced module; a use of whole-file state raises :class:`WholeFile`."""

    @property
    def whole_file_used(self) -> bool:
        return False

    @whole_file_used.setter
    def whole_file_used(self, value: bool) -> None:
        if value:
            raise WholeFile()

    def __init__(self, module, ruleset: RuleSet, *, emit: str = "torchport", text: str = "",
                 dropped_keys: frozenset[str] = frozenset()) -> None:
        self.dropped_keys = dropped_keys
        #: keys a rule asked about that a dropped statement binds: keep their statements and walk again
        self.needed_keys: set[str] = set()
        super().__init__(module, ruleset, emit=emit, text=text)
        for name, kind in (("bindings", _Watched), ("alias_uses", _Counted), ("params", _WatchedSet)):
            watched = kind()
            watched.ctx = self
            setattr(self, name, watched)
        self.module = _ModuleView(module, text, self)

    @functools.cached_property
    def dispatch_subjects(self) -> frozenset[str]:
        # comparisons with a device string are always kept (device words mark), so the sliced module has them all
        view, self.module = self.module, self.module._module
        try:
            return FileContext.dispatch_subjects.func(self)  # type: ignore[attr-defined]
        finally:
            self.module = view

    def note_binding(self, target, value) -> None:
        key = _binding_key(target)
        if key is not None:
            dict.setdefault(self.bindings, key, []).append(value)

    def note_param(self, name: str) -> None:
        if name in DEVICE_INDEX_NAMES:
            set.add(self.params, name)
