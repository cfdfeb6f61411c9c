"""Which files a scan reads: Python files and notebooks under the given paths, minus .gitignore'd and excluded ones.

Patterns follow gitignore syntax (``*.py``, ``build/``, ``/docs``, ``**/gen_*.py``,
``!keep.py``); each ``.gitignore`` applies below its own directory, the last matching
pattern wins, and an ignored directory is not entered. ``--exclude`` patterns use the
same syntax, relative to the current directory (for a path outside it: relative to
that path). Files named explicitly on the command
line are scanned even when ignored (as ruff and flake8 do), unless ``--exclude`` matches: torchport always
behaves as ruff does with ``--force-exclude`` (pre-commit names every staged file, so an exclude pattern must
hold for named files too), and says so for each such file (``on_skip``, a warning on the command line).

A walk takes ``*.py`` and ``*.ipynb`` (Jupyter notebooks: their code cells); ``extensions`` maps more
suffixes to one of those languages (``--extension pyw:python``, ``extend-include``).

Example::

    list(iter_python_files(["src"], exclude=["src/torchport/backends"]))
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

__all__ = ["IgnoreRules", "iter_python_files", "ALWAYS_SKIPPED", "LANGUAGES", "language"]

#: suffix -> language of the files a walk takes by default
LANGUAGES = {".py": "python", ".ipynb": "ipynb"}


def language(path: str | os.PathLike, extensions: dict[str, str] | None = None) -> str:
    """``"ipynb"`` for a notebook (by suffix, or a suffix ``extensions`` maps to it), else ``"python"``."""
    suffix = os.path.splitext(str(path))[1].lower()
    if extensions:
        got = extensions.get(suffix.lstrip("."))
        if got is not None:
            return got
    return LANGUAGES.get(suffix, "python")

#: Directory names never entered when walking (explicit roots are still scanned).
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                            ".tox", ".nox", ".venv", "venv", "node_modules", ".eggs", ".hypothesis"})


def _translate(pattern: str) -> str:
    """gitignore glob (no leading/trailing slash handling) -> regex matching a relative path."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern[i:i + 3] == "**/":
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern[i:i + 2] == "**":
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class IgnoreRules:
    """Compiled gitignore-style patterns anchored at one directory.

    Args:
        base: the directory the patterns are relative to.
        lines: pattern lines (comments and blanks are skipped).
    """

    def __init__(self, base: Path, lines: Iterable[str]) -> None:
        self.base = base
        self.patterns: list[tuple[re.Pattern[str], bool, bool]] = []  # (regex, negated, dir_only)
        self.lines: list[str] = []   # the pattern line of each entry of ``patterns``
        for raw in lines:
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            line = line.rstrip() if not line.endswith("\\ ") else line
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            if line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            if not line:
                continue
            rx = _translate(line)
            rx = f"^{rx}(?:/.*)?$" if anchored else f"^(?:.*/)?{rx}(?:/.*)?$"
            self.patterns.append((re.compile(rx), negated, dir_only))
            self.lines.append(raw.strip())

    @classmethod
    def from_file(cls, path: Path) -> "IgnoreRules | None":
        """Rules from a ``.gitignore``-style file, or None when it is missing/unreadable."""
        try:
            return cls(path.parent, path.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            return None

    def match(self, path: Path, is_dir: bool, *, parents_checked: bool = False) -> bool | None:
        """True (ignored), False (re-included by ``!``) or None (no pattern matched).

        ``parents_checked``: a walk reached ``path``, so no parent directory is ignored (an ignored one is not
        entered): a directory-only pattern cannot match the file then."""
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        verdict = None
        for rx, negated, dir_only in self.patterns:
            if dir_only and not is_dir:  # "build/" matches a file only through a parent directory
                if parents_checked:
                    continue
                hit = any(rx.match(parent) for parent in _parents(rel))
            else:
                hit = rx.match(rel) is not None
            if hit:
                verdict = not negated
        return verdict


def _parents(rel: str) -> Iterator[str]:
    parts = rel.split("/")
    for k in range(1, len(parts)):
        yield "/".join(parts[:k])


def _git_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def _ignored(stack: Sequence[IgnoreRules], path: Path, is_dir: bool, walked: bool = False) -> bool:
    verdict = False
    for rules in stack:
        m = rules.match(path, is_dir, parents_checked=walked)
        if m is not None:
            verdict = m
    return verdict


def _relative_pattern(pattern: str, base: Path) -> str:
    """An absolute path given to ``--exclude`` becomes a pattern anchored at ``base``."""
    if os.path.isabs(pattern):
        try:
            return "/" + Path(pattern).resolve().relative_to(base).as_posix()
        except ValueError:
            return pattern
    return pattern


def _exclude_rules(exclude: Sequence[str], base: Path, full: Path) -> IgnoreRules | None:
    """``--exclude`` patterns for one scanned path: relative to ``base`` (the current directory),
    or, for a path outside it, relative to that path's directory (else they could never match)."""
    if not exclude:
        return None
    anchor = base
    if base != full and base not in full.parents:
        anchor = full if full.is_dir() else full.parent
    return IgnoreRules(anchor, [_relative_pattern(p, anchor) for p in exclude])


def iter_python_files(paths: Sequence[str | os.PathLike], *, exclude: Sequence[str] = (),
                      respect_gitignore: bool = True, cwd: str | os.PathLike | None = None,
                      on_skip: Callable[[str, str], None] | None = None,
                      extensions: dict[str, str] | None = None,
                      skipped_dirs: frozenset[str] = ALWAYS_SKIPPED) -> Iterator[Path]:
    """Yield the Python files and notebooks under ``paths`` (files are yielded as given), sorted per directory.

    Args:
        paths: files and directories.
        exclude: gitignore-style patterns relative to ``cwd``.
        respect_gitignore: honour ``.gitignore`` files (from the enclosing git root down)
            and ``.git/info/exclude``.
        cwd: base for relative paths and ``exclude`` (default: the current directory).
        on_skip: called as ``on_skip(path, reason)`` for what is left out: a named file an exclude pattern
            matches, and (in a walk) each excluded or ignored file and directory.
        extensions: more suffixes (without the dot) a walk takes, mapped to ``"python"`` or ``"ipynb"``.
        skipped_dirs: folder names a walk never enters (``exclude`` in the settings replaces them).

    Raises:
        FileNotFoundError: a path does not exist (the message names it).
    """
    base = Path(cwd or os.getcwd()).resolve()
    suffixes = tuple(LANGUAGES) + tuple("." + e.lstrip(".") for e in (extensions or {}))
    for given in paths:
        p = Path(given)
        full = (base / p).resolve() if not p.is_absolute() else p.resolve()
        if not full.exists():
            raise FileNotFoundError(f"no such file or directory: {given}")
        excl = _exclude_rules(exclude, base, full)
        if excl is not None and _ignored([excl], full, full.is_dir()):
            if on_skip is not None:
                on_skip(str(given), f"named, but an exclude pattern matches it ({_pattern(excl, full)}); "
                                    "exclude patterns apply to named files too (ruff's --force-exclude)")
            continue
        if full.is_file():
            yield p
            continue
        stack: list[IgnoreRules] = []
        if respect_gitignore:
            root = _git_root(full)
            if root is not None:
                info = IgnoreRules.from_file(root / ".git" / "info" / "exclude")
                if info is not None:
                    stack.append(info)
                # .gitignore files between the git root and the scanned directory
                for d in reversed([full, *full.parents]):
                    if root in (d, *d.parents) and d != full:
                        gi = IgnoreRules.from_file(d / ".gitignore")
                        if gi is not None:
                            stack.append(gi)
        yield from _walk(p, full, stack, excl, respect_gitignore, on_skip, suffixes, skipped_dirs)


def _pattern(rules: IgnoreRules, path: Path) -> str:
    """The last pattern of ``rules`` that matches ``path`` (for messages)."""
    hit = "?"
    for line, (rx, negated, dir_only) in zip(rules.lines, rules.patterns):
        try:
            rel = path.relative_to(rules.base).as_posix()
        except ValueError:
            return hit
        if rx.match(rel) or (dir_only and any(rx.match(p) for p in _parents(rel))):
            hit = line
    return hit


def _walk(shown: Path, full: Path, stack: list[IgnoreRules], excl: IgnoreRules | None,
          respect_gitignore: bool, on_skip: Callable[[str, str], None] | None = None,
          suffixes: tuple[str, ...] = tuple(LANGUAGES), skipped_dirs: frozenset[str] = ALWAYS_SKIPPED
          ) -> Iterator[Path]:
    if respect_gitignore:
        gi = IgnoreRules.from_file(full / ".gitignore")
        if gi is not None:
            stack = [*stack, gi]
    try:
        entries = sorted(os.scandir(full), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir(follow_symlinks=False)
        child = full / entry.name
        if is_dir and entry.name in skipped_dirs:
            if on_skip is not None:
                on_skip(str(shown / entry.name) + "/", "a tool or VCS folder, never entered")
            continue
        if not is_dir and not entry.name.endswith(suffixes):
            continue
        if _ignored(stack, child, is_dir, walked=True):
            if on_skip is not None:
                on_skip(str(shown / entry.name) + ("/" if is_dir else ""), "ignored by .gitignore")
            continue
        if excl is not None and _ignored([excl], child, is_dir, walked=True):
            if on_skip is not None:
                on_skip(str(shown / entry.name) + ("/" if is_dir else ""),
                        f"excluded by pattern {_pattern(excl, child)!r}")
            continue
        if is_dir:
            yield from _walk(shown / entry.name, child, stack, excl, respect_gitignore, on_skip, suffixes,
                             skipped_dirs)
        elif _file_or_broken(entry):
            yield shown / entry.name


def _file_or_broken(entry: os.DirEntry) -> bool:
    """A regular file (or a link to one) -- or a broken link (loop, missing target), which is yielded so
    that reading it fails and is reported for that one file instead of ending the walk with a traceback."""
    try:
        if entry.is_file():
            return True
    except OSError:        # ELOOP: a link to itself
        pass
    return entry.is_symlink() and not os.path.exists(entry.path)
