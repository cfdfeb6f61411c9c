"""Object-store URLs (``s3://bucket/key``, ``obs://bucket/key``): parsing, configuration, retried I/O.

Everything torchport reads from or writes to a bucket goes through the few functions here, so
retries, error messages and credentials handling live in one place.

* **Filesystem** -- fsspec's ``s3fs``; ``obs://`` is Huawei OBS through its S3-compatible endpoint.
  One client per (process, scheme, endpoint), re-created after a fork (DataLoader workers).
* **Configuration** (first found wins), never printed:

  ============  ==================================================================================
  endpoint      :func:`configure` / ``--storage-endpoint`` / ``TORCHPORT_STORAGE_ENDPOINT``;
                ``obs://``: ``TORCHPORT_OBS_ENDPOINT``, ``OBS_ENDPOINT``; then ``AWS_ENDPOINT_URL_S3``,
                ``AWS_ENDPOINT_URL``; ``obs://`` falls back to ``https://obs.<region>.myhuaweicloud.com``
  region        ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / ``~/.aws/config`` (``obs://``: also ``OBS_REGION``)
  credentials   botocore's chain: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (``obs://``: also
                ``OBS_ACCESS_KEY_ID``/``OBS_SECRET_ACCESS_KEY``), ``AWS_PROFILE``, ``~/.aws/credentials``
  ============  ==================================================================================

* **Retries** -- HTTP 500/502/503/504, throttling (``SlowDown``), request timeouts, dropped and
  reset connections are retried with exponential backoff (``TORCHPORT_STORAGE_RETRIES`` attempts,
  default 8) and counted in :data:`STATS`. A missing object, a denied request or an endpoint that
  does not answer raises :class:`~torchport.errors.StorageError` naming the URL and the fix.

Example::

    from torchport.storage import store
    store.write_bytes("s3://bucket/run/hello.txt", b"hi")
    store.read_range("s3://bucket/run/hello.txt", 0, 1)     # b"h"
"""

from __future__ import annotations

import collections
import os
import random
import threading
import time
from typing import Any, Callable, Iterable, TypeVar

from torchport.errors import StorageError
from torchport.paths import SCHEMES, is_url  # the one local-or-URL answer (re-exported here)

__all__ = [
    "SCHEMES",
    "is_url",
    "split_url",
    "join",
    "parent",
    "basename",
    "configure",
    "endpoint_for",
    "filesystem",
    "STATS",
    "call",
    "read_bytes",
    "read_range",
    "write_bytes",
    "create_exclusive",
    "put_file",
    "get_file",
    "exists",
    "size",
    "listdir",
    "remove",
    "remove_prefix",
    "check_bucket",
]

T = TypeVar("T")

#: Per-process request counters: ``requests``, ``retries``, ``retried_errors`` (by kind), ``failures``.
STATS: dict[str, Any] = {"requests": 0, "retries": 0, "failures": 0, "retried_errors": collections.Counter()}
_STATS_LOCK = threading.Lock()
_OVERRIDES: dict[str, str] = {}


# -- URLs ----------------------------------------------------------------------------------------------
def split_url(url: str) -> tuple[str, str, str]:
    """``"s3://bucket/a/b"`` -> ``("s3", "bucket", "a/b")``.

    Raises:
        StorageError: not an ``s3://`` / ``obs://`` URL, or no bucket name.
    """
    if not is_url(url):
        raise StorageError(f"{url!r} is not an object-store URL (use s3://bucket/prefix or obs://bucket/prefix)")
    scheme, rest = url.split("://", 1)
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise StorageError(f"{url!r} has no bucket name (use {scheme}://bucket/prefix)")
    return scheme.lower(), bucket, key.strip("/")


def join(url: str, *parts: str) -> str:
    """``join("s3://b/run", "checkpoints", "x.pt")`` -> ``"s3://b/run/checkpoints/x.pt"``."""
    out = str(url).rstrip("/")
    for p in parts:
        p = str(p).strip("/")
        if p:
            out += "/" + p
    return out


def parent(url: str) -> str:
    """The URL one level up (never above the bucket)."""
    scheme, bucket, key = split_url(url)
    head = key.rsplit("/", 1)[0] if "/" in key else ""
    return join(f"{scheme}://{bucket}", head)


def basename(url: str) -> str:
    """Last path component of ``url``."""
    return str(url).rstrip("/").rsplit("/", 1)[-1]


# -- configuration ------------------------------------------------------------------------------------------
def configure(*, endpoint: str | None = None) -> None:
    """Set the endpoint for this process *and its children* (exported as ``TORCHPORT_STORAGE_ENDPOINT``).

    The trainer calls this with ``--storage-endpoint``; DataLoader workers and torchrun ranks
    inherit it through the environment.
    """
    if endpoint:
        os.environ["TORCHPORT_STORAGE_ENDPOINT"] = endpoint
        _OVERRIDES["endpoint"] = endpoint
        _CLIENTS.clear()


def _env(*names: str) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def endpoint_for(scheme: str) -> str | None:
    """The endpoint URL used for ``scheme`` (None: the AWS default for the region)."""
    ep = _env("TORCHPORT_STORAGE_ENDPOINT")
    if scheme == "obs":
        ep = ep or _env("TORCHPORT_OBS_ENDPOINT", "OBS_ENDPOINT")
    ep = ep or _env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    if ep is None and scheme == "obs":
        region = _env("OBS_REGION", "AWS_REGION", "AWS_DEFAULT_REGION")
        if not region:
            raise StorageError("obs:// URLs need an endpoint: set TORCHPORT_OBS_ENDPOINT=https://obs.<region>.myhuaweicloud.com "
                               "(or OBS_REGION / --storage-endpoint)")
        ep = f"https://obs.{region}.myhuaweicloud.com"
    if ep and "://" not in ep:
        ep = "https://" + ep
    return ep


def _addressing(scheme: str, ep: str | None) -> str:
    """``TORCHPORT_STORAGE_ADDRESSING`` (virtual|path|auto); default: virtual-hosted for OBS (its documented
    style), path for an endpoint given as an IP address or localhost (MinIO, test servers), else auto."""
    env = os.environ.get("TORCHPORT_STORAGE_ADDRESSING")
    if env in ("virtual", "path", "auto"):
        return env
    import ipaddress
    import urllib.parse

    host = urllib.parse.urlsplit(ep).hostname if ep else None
    if host:
        try:
            ipaddress.ip_address(host)
            return "path"
        except ValueError:
            if host == "localhost":
                return "path"
    return "virtual" if scheme == "obs" else "auto"


def _timeouts() -> tuple[float, float]:
    t = float(os.environ.get("TORCHPORT_STORAGE_TIMEOUT_S") or 60)
    return min(10.0, t), t


_CLIENTS: dict[tuple, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def filesystem(scheme: str = "s3"):
    """The ``s3fs.S3FileSystem`` for ``scheme`` in this process (cached; re-made after a fork).

    Internal retries of s3fs and botocore are switched off: :func:`call` retries and counts.
    """
    ep = endpoint_for(scheme)
    key = (os.getpid(), scheme, ep)
    fs = _CLIENTS.get(key)
    if fs is not None:
        return fs
    with _CLIENTS_LOCK:
        fs = _CLIENTS.get(key)
        if fs is None:
            try:
                import s3fs
            except ImportError:
                raise StorageError("object-store URLs need s3fs: pip install 'torchport[s3]' (or pip install s3fs)") from None
            connect, read = _timeouts()
            client_kwargs: dict[str, Any] = {}
            if ep:
                client_kwargs["endpoint_url"] = ep
            region = _env("OBS_REGION") if scheme == "obs" else None
            region = region or _env("AWS_REGION", "AWS_DEFAULT_REGION")
            if region:
                client_kwargs["region_name"] = region
            creds: dict[str, Any] = {}
            if scheme == "obs" and _env("OBS_ACCESS_KEY_ID") and not _env("AWS_ACCESS_KEY_ID"):
                creds = {"key": _env("OBS_ACCESS_KEY_ID"), "secret": _env("OBS_SECRET_ACCESS_KEY")}
            fs = s3fs.S3FileSystem(
                skip_instance_cache=True,
                use_listings_cache=False,
                client_kwargs=client_kwargs,
                config_kwargs={"connect_timeout": connect, "read_timeout": read,
                               "retries": {"total_max_attempts": 1, "mode": "standard"},
                               "s3": {"addressing_style": _addressing(scheme, ep)}},
                **creds,
            )
            fs.retries = 1  # s3fs's own retry loop: off (ours counts and classifies)
            _CLIENTS[key] = fs
    return fs


def _path(url: str) -> tuple[Any, str]:
    scheme, bucket, key = split_url(url)
    return filesystem(scheme), f"{bucket}/{key}" if key else bucket


# -- error classification -----------------------------------------------------------------------------------
_TRANSIENT_CODES = {"500", "502", "503", "504", "InternalError", "ServiceUnavailable", "SlowDown", "Throttling",
                    "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed", "TooManyRequests",
                    "RequestLimitExceeded", "BadGateway", "GatewayTimeout"}


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def classify(exc: BaseException) -> str:
    """``"transient"``, ``"no_bucket"``, ``"missing"`` (no such key), ``"denied"``, ``"unreachable"`` or ``"other"``.

    The S3 error code anywhere in the chain wins over the exception type: s3fs raises a
    ``FileNotFoundError`` for a missing bucket *and* a missing key; only the code (``NoSuchBucket``
    vs ``NoSuchKey``) tells them apart, and each has its own fix.
    """
    import asyncio
    import socket

    chain = list(_chain(exc))
    for e in chain:
        resp = getattr(e, "response", None)
        if isinstance(resp, dict):
            code = str(resp.get("Error", {}).get("Code", ""))
            status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _TRANSIENT_CODES or (isinstance(status, int) and (status >= 500 or status == 429)):
                return "transient"
            if code == "NoSuchBucket":
                return "no_bucket"
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                return "missing"
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden",
                        "AllAccessDisabled") or status == 403:
                return "denied"
    for e in chain:
        name = type(e).__name__
        if name in ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"):
            return "denied"
        if name in ("EndpointConnectionError", "ConnectTimeoutError") and not isinstance(e, ConnectionResetError):
            return "unreachable"
        if name in ("ReadTimeoutError", "ResponseStreamingError", "IncompleteReadError", "IncompleteRead",
                    "ServerDisconnectedError", "ClientPayloadError", "ClientOSError", "ConnectionClosedError",
                    "ResponseParserError", "HTTPClientError", "ProxyConnectionError", "ServerTimeoutError",
                    "FSTimeoutError"):
            return "transient"
        if isinstance(e, (ConnectionResetError, BrokenPipeError, socket.timeout, asyncio.TimeoutError, TimeoutError)):
            return "transient"
        if isinstance(e, FileNotFoundError):
            return "no_bucket" if "bucket does not exist" in str(e).lower() else "missing"
        if isinstance(e, PermissionError):
            return "denied"
    return "other"


def _label(exc: BaseException) -> str:
    """A short name for a retried error: the S3 error code / HTTP status, else the exception type."""
    for e in _chain(exc):
        resp = getattr(e, "response", None)
        if isinstance(resp, dict):
            status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return f"HTTP {status} {resp.get('Error', {}).get('Code', '')}".strip()
    inner = list(_chain(exc))[-1]
    return type(inner).__name__


def _fix(kind: str, url: str) -> str:
    scheme = url.split("://", 1)[0]
    try:
        ep = endpoint_for(scheme) or "the AWS default endpoint"
    except StorageError:
        ep = "(none set)"
    if kind == "no_bucket":
        bucket = split_url(url)[1]
        return (f"bucket {bucket} does not exist at endpoint {ep} ({url}); create it (e.g. `aws s3 mb "
                f"{scheme}://{bucket}`) or correct the bucket name / the endpoint (--storage-endpoint)")
    if kind == "missing":
        return (f"{url} does not exist (no object at that key at endpoint {ep}); check the key, or that it was "
                "written (e.g. `torchport data pack SRC URL`)")
    if kind == "denied":
        return (f"access to {url} was denied at endpoint {ep}; check the credentials (AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials) and the bucket policy")
    if kind == "unreachable":
        return (f"cannot reach the object store at {ep} for {url}; check the endpoint (--storage-endpoint, "
                "TORCHPORT_STORAGE_ENDPOINT, AWS_ENDPOINT_URL) and the network")
    return ""


def call(fn: Callable[[], T], url: str, *, what: str = "request", missing_ok: bool = False) -> T | None:
    """Run one store request with retries; translate failures into :class:`StorageError`.

    Args:
        fn: the request (no arguments).
        url: named in error messages.
        what: verb for messages ("read", "write" ...).
        missing_ok: return None instead of raising when the object does not exist.
    """
    attempts = max(1, int(os.environ.get("TORCHPORT_STORAGE_RETRIES") or 8))
    base = float(os.environ.get("TORCHPORT_STORAGE_BACKOFF_S") or 0.05)
    last: BaseException | None = None
    for attempt in range(attempts):
        with _STATS_LOCK:
            STATS["requests"] += 1
        try:
            return fn()
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below
            kind = classify(exc)
            if kind == "missing" and missing_ok:
                return None
            if kind in ("missing", "denied", "no_bucket"):   # a missing bucket is never "no such object yet"
                with _STATS_LOCK:
                    STATS["failures"] += 1
                raise StorageError(_fix(kind, url)) from None
            if kind == "other":
                with _STATS_LOCK:
                    STATS["failures"] += 1
                raise StorageError(f"{what} {url} failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                                   f"check the URL and endpoint ({_fix('unreachable', url).split('; ', 1)[-1]})") from None
            last = exc
            if attempt + 1 < attempts:
                with _STATS_LOCK:
                    STATS["retries"] += 1
                    STATS["retried_errors"][_label(exc)] += 1
                # exponential backoff with full jitter, capped at 2 s
                time.sleep(random.uniform(0.5, 1.0) * min(2.0, base * (2 ** attempt)))
    with _STATS_LOCK:
        STATS["failures"] += 1
    kind = classify(last) if last is not None else "other"
    if kind == "unreachable":
        raise StorageError(_fix(kind, url) + f" (gave up after {attempts} attempts)") from None
    raise StorageError(f"{what} {url} kept failing after {attempts} attempts ({type(last).__name__}: "
                       f"{str(last).splitlines()[0] if last and str(last) else ''}); the store is overloaded or "
                       "unreachable -- retry later, or raise TORCHPORT_STORAGE_RETRIES") from None


# -- operations ----------------------------------------------------------------------------------------------
def read_bytes(url: str) -> bytes:
    """The whole object."""
    fs, p = _path(url)
    return call(lambda: fs.cat_file(p), url, what="read")


def read_range(url: str, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of the object (one ranged GET); short reads are retried."""
    fs, p = _path(url)

    def get() -> bytes:
        data = fs.cat_file(p, start=start, end=end)
        if len(data) != end - start:
            raise ConnectionResetError(f"short read: {len(data)} of {end - start} bytes")
        return data

    return call(get, url, what="read")


def write_bytes(url: str, data: bytes) -> None:
    """Write the whole object (one PUT, or a multipart upload that only appears when complete)."""
    fs, p = _path(url)
    call(lambda: fs.pipe_file(p, bytes(data)), url, what="write")


def create_exclusive(url: str, data: bytes) -> bool:
    """Write the object only if it does not exist yet (a conditional PUT, ``If-None-Match: *``).

    Returns True when this call created it, False when it already existed -- of two concurrent
    callers exactly one gets True (the store decides). Used for the one-writer lease.
    """
    fs, p = _path(url)

    def put() -> bool:
        try:
            fs.pipe_file(p, bytes(data), mode="create")
        except FileExistsError:
            return False
        except Exception as exc:  # noqa: BLE001 - a 412 PreconditionFailed is "exists"; the rest is classified
            if any(str(getattr(e, "response", {}).get("Error", {}).get("Code", "")) in ("PreconditionFailed", "412")
                   for e in _chain(exc) if isinstance(getattr(e, "response", None), dict)):
                return False
            raise
        return True

    return bool(call(put, url, what="create"))


def put_file(local: str | os.PathLike, url: str) -> None:
    """Upload a local file (multipart for large files: the object appears only when complete)."""
    fs, p = _path(url)
    if not os.path.isfile(local):  # a local problem must not be reported as a missing object
        raise FileNotFoundError(f"cannot upload {os.fspath(local)} to {url}: the local file does not exist")
    call(lambda: fs.put_file(os.fspath(local), p), url, what="upload")


def get_file(url: str, local: str | os.PathLike) -> None:
    """Download the object to ``local`` (written to a temp name, then renamed)."""
    fs, p = _path(url)
    tmp = f"{os.fspath(local)}.part-{os.getpid()}"
    try:
        call(lambda: fs.get_file(p, tmp), url, what="download")
        os.replace(tmp, local)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def exists(url: str) -> bool:
    """True when the object exists (a HEAD request; prefixes are not objects)."""
    return info(url) is not None


def info(url: str) -> dict | None:
    """Object metadata (``size`` ...) or None when it does not exist."""
    fs, p = _path(url)

    def head():
        fs.invalidate_cache(p)
        out = fs.info(p)
        if out.get("type") != "file":
            raise FileNotFoundError(p)
        return out

    return call(head, url, what="stat", missing_ok=True)


def size(url: str) -> int:
    """Object size in bytes (StorageError when it does not exist)."""
    out = info(url)
    if out is None:
        raise StorageError(_fix("missing", url))
    return int(out["size"])


def listdir(url: str) -> list[str]:
    """Names directly under the prefix ``url`` (objects and sub-prefixes); ``[]`` when there are none."""
    fs, p = _path(url)

    def ls():
        fs.invalidate_cache(p)
        return fs.ls(p.rstrip("/"), detail=False, refresh=True)

    out = call(ls, url, what="list", missing_ok=True) or []
    return sorted(str(x).rstrip("/").rsplit("/", 1)[-1] for x in out)


def remove(url: str) -> None:
    """Delete the object (no error when it is already gone)."""
    fs, p = _path(url)
    call(lambda: fs.rm_file(p), url, what="delete", missing_ok=True)


def remove_prefix(url: str) -> None:
    """Delete every object under the prefix ``url``."""
    fs, p = _path(url)

    def rm():
        found = fs.find(p.rstrip("/") + "/")
        if found:
            fs.rm(found)

    call(rm, url, what="delete", missing_ok=True)


def check_bucket(url: str) -> str:
    """Make sure the bucket of ``url`` exists and answers (one HEAD request, retried like any other).

    Returns a one-line description (``"bucket B exists at ENDPOINT"``).

    Raises:
        StorageError: the bucket does not exist, access is denied, or the endpoint does not answer --
            each with its own fix. Call it before work that would be lost (packing, training).
    """
    scheme, bucket, _ = split_url(url)
    fs = filesystem(scheme)

    def head():
        try:
            fs.call_s3("head_bucket", Bucket=bucket)
        except Exception as exc:  # noqa: BLE001 - HEAD has no body: a 404 on a bucket is NoSuchBucket
            if classify(exc) == "missing":
                raise StorageError(_fix("no_bucket", url)) from None
            raise

    call(head, url, what="check bucket of")
    return f"bucket {bucket} exists at {endpoint_for(scheme) or 'the AWS default endpoint'}"


def bucket_listable(url: str) -> tuple[bool, str]:
    """(ok, detail) -- the bucket of ``url`` exists (:func:`check_bucket`) and can be listed."""
    scheme, bucket, _ = split_url(url)
    try:
        check_bucket(url)
        names = listdir(f"{scheme}://{bucket}")
    except StorageError as e:
        return False, str(e)
    return True, f"bucket {bucket} exists and is listable ({len(names)} top-level entries)"
