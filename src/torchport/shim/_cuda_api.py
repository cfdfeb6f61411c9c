"""Replacements for ``torch.cuda.*`` (and the other names of :mod:`torchport.shim.surface`) under the shim.

Each replacement calls through the selected backend's device module (``torch.npu``,
``torch.xpu`` ...). Where that module lacks a function -- always the case on a CPU
target -- the documented stand-in of :data:`torchport.shim.surface.SURFACE` answers:
memory statistics are 0, seeding and RNG state go to the CPU generator, streams are
CPU streams and events time with the host clock -- or the call is refused in one line.

Every replacement the shim installs is *caller-aware*: calls from user code act on /
answer for the selected device; calls from installed libraries and from torch itself
reach the original ``torch.cuda`` function. So ``"cuda" if torch.cuda.is_available() else "cpu"``
in a script lands on the accelerator, while a library deciding whether to launch a
CUDA-only kernel -- or torch's own ``torch.manual_seed`` calling
``torch.cuda.manual_seed_all`` -- still sees the real CUDA runtime (see ``docs/shim.md``).

The sections (here, ``_cuda_streams``, ``_cuda_memory``, ``_cuda_extras``) each return
``{qualified name: implementation}``; :func:`user_implementations` collects them, and
:func:`cuda_patches` (the shim) / :func:`implementations` (``surface.standin``, fixed files) use them.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
import threading
import warnings
from typing import Any, Callable

__all__ = ["cuda_patches", "implementations", "user_implementations", "Value"]

C = "torch.cuda."


class _ProxyMeta(type):
    """``isinstance`` against a caller-aware stand-in class checks the classes it can produce."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._torchport_classes)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._torchport_classes)

    def __getattr__(cls, name: str) -> Any:
        # class attributes (Stream.priority_range, GreenContext.create): user code gets the stand-in's, the rest
        # the real class's
        if name.startswith("__"):
            raise AttributeError(name)
        own = type.__getattribute__(cls, "__dict__")
        if own["_torchport_is_user"](sys._getframe(1).f_code.co_filename):
            source = own["_torchport_attrs"]
            if getattr(source, "_torchport_refused", False):
                return source          # calling it raises the one-line refusal
            return getattr(source, name)
        return getattr(own["__wrapped__"], name)


class Value:
    """A module attribute that is a value, not a callable (``torch.cuda.default_generators``): ``get()`` gives
    what user code reads."""

    def __init__(self, get: Callable[[], Any]) -> None:
        self.get = get


class _ValueProxy:
    """A caller-aware module value: user code reads ``user()``'s object, everyone else the real one (attribute
    reads and writes, indexing, ``len``, iteration)."""

    __slots__ = ("_user", "_real", "_is_user")

    def __init__(self, user: Callable[[], Any], real: Any, is_user: Callable[[str], bool]) -> None:
        object.__setattr__(self, "_user", user)
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_is_user", is_user)

    def _pick(self) -> Any:
        frame = sys._getframe(2)
        return self._user() if self._is_user(frame.f_code.co_filename) else self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pick(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._pick(), name, value)

    def __getitem__(self, key: Any) -> Any:
        return self._pick()[key]

    def __len__(self) -> int:
        return len(self._pick())

    def __iter__(self):
        return iter(self._pick())

    def __repr__(self) -> str:
        return repr(self._pick())

    # comparisons, truth and membership answer as the picked value would (``gens == torch.npu.default_generators``)
    def __eq__(self, other: object) -> bool:
        return self._pick() == other

    def __ne__(self, other: object) -> bool:
        return self._pick() != other

    def __bool__(self) -> bool:
        return bool(self._pick())

    def __contains__(self, item: object) -> bool:
        return item in self._pick()

    def __hash__(self) -> int:
        return hash(self._pick())


def _dispatch(name: str, user_fn: Callable, real: Any, classifier: Any,
              produces: tuple[type, ...] = (), acting_fn: Callable | None = None) -> Any:
    """A stand-in for ``name``: ``user_fn`` for user code, ``real`` for everyone else --
    except a library acting on a CUDA device the user handed down (``CallerClassifier.acts_for_user``),
    which gets ``acting_fn`` (default ``user_fn``).

    Classes (``Stream``, ``Event``, ``device``) get a class stand-in -- not a function -- so
    annotations such as ``Optional[torch.cuda.Stream]`` and ``isinstance`` keep working in
    code imported while the shim is active.
    """
    short = name.rsplit(".", 1)[1]
    doc = (f"[torchport shim] ``{name}`` for user code acts on the selected device; installed "
           f"libraries and torch itself get the original (see docs/shim.md).\n\n{getattr(real, '__doc__', '') or ''}")
    is_user, acts_for_user = classifier.is_user_file, classifier.acts_for_user
    acting = acting_fn or user_fn
    if isinstance(user_fn, Value):
        return _ValueProxy(user_fn.get, real, is_user)
    if isinstance(real, type):
        def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            if is_user(frame.f_code.co_filename):
                return user_fn(*args, **kwargs)
            if acts_for_user(frame):
                return acting(*args, **kwargs)
            return real(*args, **kwargs)

        classes = tuple(c for c in (real, *produces) if isinstance(c, type))
        attrs = user_fn if getattr(user_fn, "_torchport_refused", False) else (produces[-1] if produces else real)
        return _ProxyMeta(short, (), {"__new__": __new__, "__doc__": doc, "__module__": __name__,
                                      "__wrapped__": real, "_torchport_classes": classes,
                                      "_torchport_attrs": attrs, "_torchport_is_user": is_user})

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if is_user(frame.f_code.co_filename):
            return user_fn(*args, **kwargs)
        if acts_for_user(frame):
            return acting(*args, **kwargs)
        return real(*args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = short
    stand_in.__doc__ = doc
    stand_in.__wrapped__ = real  # type: ignore[attr-defined]
    return stand_in


def _r(device: Any) -> str:
    """A device argument as it appeared in the call (empty when omitted)."""
    return "" if device is None else repr(device)


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


@dataclasses.dataclass
class _Api:
    """What every section of the stand-ins shares: the target, its device map, the report."""

    dm: Any
    target: Any
    accel: bool
    mod: Any
    hit: Callable
    note: Callable[[str], None]
    produces: dict = dataclasses.field(default_factory=dict)
    warned: set = dataclasses.field(default_factory=set)

    @property
    def label(self) -> str:
        return f"{self.target.device} ({self.target.backend.label})" if self.accel else str(self.target.device)

    def fn_of(self, path: str) -> Any:
        """``path`` (``"memory._snapshot"`` for a submodule) from the selected backend's device module, or None."""
        obj = self.mod
        for part in path.split("."):
            if obj is None:
                return None
            try:
                obj = getattr(obj, part)
            except Exception:  # AttributeError, or a lazy submodule that cannot load
                return None
        return obj

    def dev_arg(self, device: Any) -> Any:
        """A CUDA device argument as the target module expects it (None stays None)."""
        if device is None:
            return None
        if isinstance(device, int) and not isinstance(device, bool):
            return self.dm.device(device)
        return self.dm.map(device)

    def via(self, qual: str, fallback: Callable, *, path: str | None = None, device_pos: int | None = 0) -> Callable:
        """``qual`` acting through the backend module's ``path`` (CUDA device argument at ``device_pos`` or
        ``device=`` mapped) where it has one, else ``fallback(*args, **kwargs)`` (the documented stand-in)."""
        name = qual.rsplit(".", 1)[1]
        path = path or name
        dm, hit = self.dm, self.hit

        def impl(*args: Any, **kwargs: Any) -> Any:
            fn = self.fn_of(path)
            device = None
            if device_pos is not None:
                device = kwargs["device"] if "device" in kwargs else (args[device_pos] if len(args) > device_pos
                                                                      else None)
            hit(qual, f"{name}({_r(device)})", dm.device(dm.index_of(device)) if fn is not None else "stand-in")
            if fn is None:
                return fallback(*args, **kwargs)
            if device is not None:
                mapped = self.dev_arg(device)
                if "device" in kwargs:
                    kwargs["device"] = mapped
                else:
                    args = (*args[:device_pos], mapped, *args[device_pos + 1:])
            return fn(*args, **kwargs)

        impl.__name__ = impl.__qualname__ = name
        impl.__doc__ = f"Under the torchport shim: ``{qual}`` on the selected device (see docs/shim.md)."
        return impl

    def refuse(self, qual: str, fix: str) -> Callable:
        """A call that raises :class:`~torchport.shim.surface.RefusedCall`: one line naming ``qual`` and ``fix``."""
        from torchport.shim.surface import RefusedCall

        def refused(*args: Any, **kwargs: Any) -> Any:
            self.note(f"{qual} was refused on {self.label}")
            raise RefusedCall(f"{qual}() cannot run on {self.label}: {fix}")

        refused.__name__ = refused.__qualname__ = qual.rsplit(".", 1)[1]
        refused._torchport_refused = True  # type: ignore[attr-defined]
        return refused

    def via_or_refuse(self, qual: str, fix: str, *, path: str | None = None, device_pos: int | None = None) -> Callable:
        """The backend module's ``path`` where it has one, else refused."""
        return self.via(qual, self.refuse(qual, fix), path=path, device_pos=device_pos)

    def warn_once(self, key: str, message: str) -> None:
        """One ``UserWarning`` per installation and message key, and a note in the report."""
        if key not in self.warned:
            self.warned.add(key)
            self.note(message)
            warnings.warn(f"torchport shim: {message}", UserWarning, stacklevel=_outside_shim())


_SHIM_DIR = os.path.dirname(os.path.abspath(__file__))


def _outside_shim() -> int:
    """The ``stacklevel`` of the first frame outside torchport/shim, seen from the caller of the caller."""
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _SHIM_DIR:
        frame, level = frame.f_back, level + 1
    return level

#: names whose redirect the shim installs elsewhere (``_redirects.amp_patches`` rewrites the device type in
#: torch.amp's base classes); their implementations here serve :func:`implementations` (fixed files) only
_REDIRECTED_ELSEWHERE = ("torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler")


class _ShortKeys(dict):
    """``produces`` for a section that names classes by their ``torch.cuda`` short names."""

    def __init__(self, api: "_Api") -> None:
        super().__init__()
        self._api = api

    def __setitem__(self, key: str, value: Any) -> None:
        self._api.produces[key if key.startswith("torch.") else C + key] = value

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


def _sections() -> tuple[Callable, ...]:
    """Every section: ``section(api) -> {qualified name (or torch.cuda short name): implementation}``. A module
    ``torchport.shim._graphs`` (the CUDA-graph redirects) joins with its own ``SECTIONS`` when it exists."""
    from torchport.shim import _cuda_device, _cuda_extras, _cuda_memory, _cuda_streams

    graphs: tuple[Callable, ...] = ()
    if importlib.util.find_spec("torchport.shim._graphs") is not None:
        module = importlib.import_module("torchport.shim._graphs")
        graphs = tuple(getattr(module, "SECTIONS", ()))
        if not graphs and hasattr(module, "graph_api"):   # a section of the (api, produces) shape
            graphs = (lambda api: module.graph_api(api, _ShortKeys(api)),)
    return (*_cuda_device.SECTIONS, *_cuda_memory.SECTIONS, *_cuda_streams.SECTIONS, *_cuda_extras.SECTIONS,
            *graphs)


def user_implementations(api: _Api) -> dict[str, Any]:
    """``{qualified name: what user code gets}`` for every name with an implementation (functions, factory
    functions standing in for classes, :class:`Value` for module values)."""
    out: dict[str, Any] = {}
    for section in _sections():
        for key, fn in section(api).items():
            out[key if key.startswith("torch.") else C + key] = fn
    return out


def _api_for(target: Any, dm: Any, hit: Callable, note: Callable[[str], None]) -> _Api:
    accel = bool(target.is_accelerator)
    return _Api(dm=dm, target=target, accel=accel, mod=target.module if accel else None, hit=hit, note=note)


#: modules whose attributes are patched where they hold the identical object (``torch.cuda.memory.memory_allocated``
#: is ``torch.cuda.memory_allocated``); names of their own are keyed by their own qualified names
_OWNERS = ("torch.cuda", "torch.cuda.memory", "torch.cuda.random", "torch.cuda.graphs", "torch.cuda.amp",
           "torch.cuda.amp.autocast_mode", "torch.cuda.amp.common", "torch.cuda.nvtx", "torch.backends.cuda")


def cuda_patches(shim: Any) -> list[tuple[Any, str, Any, str]]:
    """``[(owner, attribute, caller-aware replacement, api)]`` for every implemented name, on every owner module
    that holds it (the shim's patch table)."""
    api = _api_for(shim.target, shim.map, shim.hit, shim.report.note)
    impls = user_implementations(api)
    owners = [importlib.import_module(m) for m in _OWNERS]

    def validated() -> bool:
        # a library validating the user's "cuda" request: it is redirected to the selected device, which exists
        shim.hit("torch.cuda.is_available", "is_available() (library, for your device)", True)
        return True

    acting = {C + "is_available": validated}
    out: list[tuple[Any, str, Any, str]] = []
    for qual, fn in impls.items():
        if qual in _REDIRECTED_ELSEWHERE:
            continue
        modname, _, name = qual.rpartition(".")
        home = sys.modules.get(modname)
        if home is None or name not in vars(home):
            continue  # not in this torch build
        original = vars(home)[name]
        replacement = _dispatch(qual, fn, original, shim.classifier, api.produces.get(qual, ()), acting.get(qual))
        for owner in owners:
            if owner is home or vars(owner).get(name) is original:
                out.append((owner, name, replacement, qual))
    return out


class _AlwaysUser:
    """The classifier of a fixed file: every caller is user code."""

    @staticmethod
    def is_user_file(filename: str) -> bool:
        return True

    @staticmethod
    def acts_for_user(frame: Any) -> bool:
        return True


_impl_lock = threading.Lock()
_impl_cache: dict[tuple[str, int, int], dict[str, Any]] = {}


def _home(qual: str) -> Any:
    modname, _, name = qual.rpartition(".")
    return vars(sys.modules.get(modname) or importlib.import_module(modname)).get(name)


def implementations(target: Any = None) -> dict[str, Any]:
    """``{qualified name: implementation}`` for fixed files (``torchport.compat``): the shim's user-code
    implementations without the caller test, on ``target`` (default ``torchport.current()``), class stand-ins as
    classes, values as values. Device indices follow torchport's selection
    (:class:`~torchport.shim._mapping.FollowingMap`). On a CUDA target, torch's own objects (the shim
    redirects nothing there). Built once per backend."""
    from torchport.runtime.device import current
    from torchport.shim._mapping import FollowingMap
    from torchport.shim.core import _dist_backend

    target = target if target is not None else current()
    key = (target.backend.name, id(target.backend), id(target.module))  # an emulator installed anew: built anew
    with _impl_lock:
        cached = _impl_cache.get(key)
        if cached is not None:
            return cached
        api = _api_for(target, FollowingMap(target, _dist_backend(target)), _noop, _noop)
        impls = user_implementations(api)
        out: dict[str, Any] = {}
        for qual, fn in impls.items():
            real = _home(qual)
            if target.type == "cuda":
                out[qual] = real
            elif isinstance(fn, Value):
                out[qual] = fn.get()
            elif isinstance(real, type):
                out[qual] = _dispatch(qual, fn, real, _AlwaysUser, api.produces.get(qual, ()))
            else:
                out[qual] = fn
        _impl_cache[key] = out
        return out
