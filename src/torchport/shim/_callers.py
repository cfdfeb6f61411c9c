"""Who is calling? Tell the user's own code apart from installed libraries, torch and the stdlib.

The shim answers ``torch.cuda.is_available()`` differently depending on the caller
(see ``docs/shim.md``), and the redirect report names the first call site *in user
code*. Both need one cheap question answered: is this source file part of the
user's program?

A file is **user code** when it is the script or module ``torchport run`` started,
lies under an explicitly given user path, or lies outside every place packages are
installed (site-/dist-packages, the stdlib, torch, torchport itself). Answers are
cached per file name, so the check is a dict lookup after the first call.

Example::

    classifier = CallerClassifier(user_paths=["/home/me/project"])
    classifier.is_user_file(__file__)          # True for your own modules
    classifier.first_user_site(sys._getframe())  # "train.py:42"
"""

from __future__ import annotations

import os
import re
import site
import sys
import sysconfig
from types import FrameType
from typing import Iterable

__all__ = ["CallerClassifier", "installed_roots"]

_PACKAGE_DIR_NAMES = ("site-packages", "dist-packages")
#: a CUDA device name as user code hands it to a library (``args.device`` = "cuda" / "cuda:0")
_CUDA_NAME = re.compile(r"^cuda(:\d+)?$")
#: how many library frames may sit between a torch.cuda call and the user code that handed down the device
_ACTING_DEPTH = 4


def _norm(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _installed(path: str) -> bool:
    """True when ``path`` lies in a ``site-packages`` / ``dist-packages`` folder."""
    parts = path.split(os.sep)
    return any(name in parts for name in _PACKAGE_DIR_NAMES)


def core_roots(stdlib: bool = True) -> tuple[str, ...]:
    """Directories of torch, torchport and (``stdlib``) the stdlib: code that never acts on a user's device
    request. A stdlib folder also holds ``site-packages``; see ``CallerClassifier._is_core``."""
    import torch

    import torchport

    paths = sysconfig.get_paths() if stdlib else {}
    roots = {paths.get("stdlib"), paths.get("platstdlib"), os.path.dirname(torch.__file__),
             os.path.dirname(torchport.__file__)}
    return tuple(sorted({_norm(r) + os.sep for r in roots if r}))


def installed_roots() -> tuple[str, ...]:
    """Directories whose files are never user code: stdlib, site-packages, torch, torchport."""
    import torch

    import torchport

    roots: set[str] = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            roots.add(paths[key])
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # some embedded / virtualenv builds lack it
        pass
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if user_site:
        roots.add(user_site)
    roots.add(os.path.dirname(torch.__file__))
    roots.add(os.path.dirname(torchport.__file__))
    return tuple(sorted({_norm(r) + os.sep for r in roots if r}))


class CallerClassifier:
    """Classify source files (and so frames) as user code or library code.

    Args:
        user_paths: files or directories that are always user code, even when they
            live inside site-packages (e.g. the script ``torchport run`` started, or
            your own package installed non-editable).
        library_roots: directories that are never user code; default
            :func:`installed_roots`.
    """

    def __init__(self, user_paths: Iterable[str] = (), library_roots: Iterable[str] | None = None) -> None:
        self._user = tuple(_norm(p) for p in user_paths)
        self._core = core_roots()
        self._core_packages = core_roots(stdlib=False)
        roots = installed_roots() if library_roots is None else library_roots
        self._roots = tuple(r if r.endswith(os.sep) else r + os.sep for r in (_norm(r) for r in roots))
        self._cache: dict[str, bool] = {}
        self._core_cache: dict[str, bool] = {}
        # Our own shim frames are never "the caller" we want to name.
        self._shim_dir = _norm(os.path.dirname(__file__)) + os.sep

    def add_user_path(self, path: str) -> None:
        """Treat ``path`` (a file or a directory) as user code from now on."""
        self._user = self._user + (_norm(path),)
        self._cache.clear()

    def is_user_file(self, filename: str) -> bool:
        """True when ``filename`` (a code object's ``co_filename``) belongs to the user's program."""
        hit = self._cache.get(filename)
        if hit is not None:
            return hit
        verdict = self._classify(filename)
        self._cache[filename] = verdict
        return verdict

    def _classify(self, filename: str) -> bool:
        if filename.startswith("<"):
            # <stdin>, <string>, <ipython-input-...>, notebooks: user; <frozen importlib...>: not.
            return not filename.startswith("<frozen")
        path = _norm(filename)
        for user in self._user:
            if path == user or path.startswith(user + os.sep):
                return True
        if any(path.startswith(root) for root in self._roots):
            return False
        return not _installed(path)

    def acts_for_user(self, frame: FrameType | None) -> bool:
        """True when ``frame`` is an installed library working on a CUDA device name that user code handed
        down, with the user's frame at most a few library frames above.

        timm's ``init_distributed_device(args.device)`` asserts ``torch.cuda.is_available()`` when the user
        asked for ``"cuda"`` and then calls ``torch.cuda.set_device(device)``: it validates and applies the
        user's choice, so it gets the user's redirect. torch, torchport and the stdlib never act for the user.
        """
        handed_down = False
        f = frame
        for _ in range(_ACTING_DEPTH + 1):
            if f is None:
                return False
            name = f.f_code.co_filename
            if self.is_user_file(name):
                return handed_down
            if name.startswith("<") or self._is_core(name):
                return False
            if not handed_down:
                handed_down = any(isinstance(v, str) and _CUDA_NAME.match(v) for v in f.f_locals.values())
            f = f.f_back
        return False

    def _is_core(self, filename: str) -> bool:
        """torch, torchport or the stdlib -- not a package installed beside them: the stdlib folder of a
        virtualenv (``platstdlib``) and of a plain install holds ``site-packages``, timm included.
        Decided once per file (this runs for every frame walked on every redirected call)."""
        hit = self._core_cache.get(filename)
        if hit is None:
            path = _norm(filename)
            hit = any(path.startswith(root) for root in self._core) and not (
                _installed(path) and not any(path.startswith(root) for root in self._core_packages))
            self._core_cache[filename] = hit
        return hit

    def caller_is_user(self, depth: int = 2) -> bool:
        """True when the frame ``depth`` levels above this call is user code.

        ``depth=2`` is the caller of the function that calls this method.
        """
        try:
            frame = sys._getframe(depth)
        except ValueError:
            return True
        return self.is_user_file(frame.f_code.co_filename)

    def first_user_site(self, frame: FrameType | None) -> str:
        """``"file:line"`` of the innermost user-code frame at or above ``frame``.

        Falls back to the innermost frame outside the shim, marked ``(library)``,
        when no user code is on the stack (e.g. a library redirected a call on its own).
        """
        fallback = None
        f = frame
        while f is not None:
            name = f.f_code.co_filename
            if self.is_user_file(name):
                return f"{_short(name)}:{f.f_lineno}"
            if fallback is None and not _norm(name).startswith(self._shim_dir):
                fallback = f"{_short(name)}:{f.f_lineno} (library)"
            f = f.f_back
        return fallback or "<unknown>"


def _short(filename: str) -> str:
    """A path relative to the working directory when that is shorter, else as given."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # other drive on Windows
        return filename
    return rel if not rel.startswith(".." + os.sep + "..") and len(rel) < len(filename) else filename
