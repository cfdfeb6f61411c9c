"""One decision for every path option: a local path, or an object-store URL -- or a one-line refusal.

Every option that takes a path (``train --data/--run-dir/--runs-root/--checkpoint-dir/--resume``,
``data pack DST``, ``data verify/inspect PATH``, ``bench --data``, every ``--json``/``-o`` report file)
is resolved here, once, at the edge. The answer is a :class:`~pathlib.Path` for a local path or the
URL string for an ``s3://`` / ``obs://`` URL the option supports; anything else is a
:class:`~torchport.errors.ConfigError` naming the option and the fix (exit 2):

* a URL given to an option that only takes local paths (``--run-dir s3://b/run``);
* a URL scheme torchport does not speak (``gs://``, ``https://`` ...; fsspec's protocol registry
  tells a scheme from a local name);
* a malformed store URL (``s3:/bucket/x``, ``s3:bucket``, ``s3://``) -- which would otherwise
  become a local folder named ``s3:``.

``file://`` URLs are local paths. Code past the edge asks :func:`is_url` (the only place the question
"local or URL?" is answered) and hands URLs to :mod:`torchport.storage.store`.

Example::

    from torchport.paths import resolve
    resolve("s3://b/ckpt", option="--checkpoint-dir", remote=True)   # "s3://b/ckpt"
    resolve("runs/a", option="--run-dir")                            # Path("runs/a")
    resolve("s3://b/run", option="--run-dir")                        # ConfigError: ... must be a local path ...
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from torchport.errors import ConfigError

__all__ = ["SCHEMES", "is_url", "resolve", "check", "inside", "plain_name"]

#: URL schemes torchport reads and writes (through s3fs; ``obs://`` is Huawei OBS's S3 endpoint).
SCHEMES = ("s3", "obs")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(//)?(.*)$", re.S)


def is_url(path: Any) -> bool:
    """True for a well-formed ``s3://...`` / ``obs://...`` (a str, or anything whose ``fspath`` is one)."""
    s = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(s, str) or "://" not in s:
        return False
    return s.split("://", 1)[0].lower() in SCHEMES


def _known_scheme(scheme: str) -> bool:
    from fsspec.registry import known_implementations

    return scheme in SCHEMES or scheme in known_implementations


def resolve(value: Any, *, option: str, remote: bool = False, local_hint: str = "") -> Path | str | None:
    """The one answer for a path option: ``Path`` (local), the URL ``str`` (store), or ConfigError.

    Args:
        value: what the user gave (None passes through).
        option: the option's name as the user typed it (``"--run-dir"``), named in the message.
        remote: whether this option accepts ``s3://`` / ``obs://`` URLs.
        local_hint: appended to the refusal of a URL by a local-only option (what to do instead).

    Raises:
        ConfigError: a URL this option does not take, an unknown scheme, or a malformed store URL.
    """
    if value is None:
        return None
    s = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    m = _SCHEME.match(s)
    if m is None or len(m.group(1)) < 2 or not _known_scheme(m.group(1).lower()):
        return Path(s)          # a plain local path (a one-letter "scheme" is a Windows drive)
    scheme, slashes, rest = m.group(1).lower(), m.group(2), m.group(3)
    supported = "s3://bucket/prefix or obs://bucket/prefix" if remote else "a local path"
    if scheme == "file":
        return Path(rest)
    if scheme not in SCHEMES:
        raise ConfigError(f"{option} {s}: {scheme}:// is not supported; use {supported}")
    if not remote:
        raise ConfigError(f"{option} {s}: {option} must be a local path, not an object-store URL"
                          + (f"; {local_hint}" if local_hint else ""))
    if not slashes or not rest.split("/", 1)[0]:
        raise ConfigError(f"{option} {s}: malformed object-store URL (not a local folder named {scheme + ':'!r}); "
                          f"write {scheme}://bucket/prefix")
    return f"{scheme}://{rest}"


def check(value: Any, *, option: str, remote: bool = False, local_hint: str = "") -> None:
    """:func:`resolve` for its refusal only (the value itself is kept as given)."""
    resolve(value, option=option, remote=remote, local_hint=local_hint)


def inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """True when local ``path`` really is (symlinks followed) ``root`` or under it -- the one confinement test
    for names and links read from elsewhere (a data set's links, ``fix --write``'s files)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def plain_name(name: Any) -> bool:
    """True when ``name`` (read from a manifest, an index or DCP metadata) is one file name in its directory:
    a non-empty string without a directory part (``/`` or ``\\``), not ``.`` / ``..``, not absolute, no NUL.
    With :func:`inside` (for the links), the one test of names read from elsewhere."""
    return (isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in ("/", "\\", "\0"))
            and not os.path.isabs(name))
