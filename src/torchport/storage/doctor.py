"""The object-store part of ``torchport doctor``: endpoint reachable? bucket exists and listable? Never a secret.

A missing bucket, denied access or an endpoint that does not answer is a problem with its own fix;
``torchport doctor --store URL`` then exits 1 (it was asked about that URL).

Reported when a URL is passed (``torchport doctor --store s3://bucket/prefix``) or an endpoint is
configured (``TORCHPORT_STORAGE_ENDPOINT``, ``TORCHPORT_OBS_ENDPOINT``/``OBS_ENDPOINT``,
``AWS_ENDPOINT_URL[_S3]``). Credentials are reported by *source* only (``environment``,
``profile NAME``, ``~/.aws/credentials``), never by value.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

__all__ = ["store_report", "configured"]

_ENDPOINT_VARS = ("TORCHPORT_STORAGE_ENDPOINT", "TORCHPORT_OBS_ENDPOINT", "OBS_ENDPOINT", "AWS_ENDPOINT_URL_S3",
                  "AWS_ENDPOINT_URL")


def configured() -> bool:
    """True when an object-store endpoint is set in the environment."""
    return any(os.environ.get(v) for v in _ENDPOINT_VARS)


def _credential_source(scheme: str) -> str:
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        return "environment (AWS_ACCESS_KEY_ID)"
    if scheme == "obs" and os.environ.get("OBS_ACCESS_KEY_ID"):
        return "environment (OBS_ACCESS_KEY_ID)"
    if os.environ.get("AWS_PROFILE"):
        return f"profile {os.environ['AWS_PROFILE']}"
    path = os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials")
    if os.path.isfile(path):
        return f"{path} (default profile)"
    return "none found (botocore may still use instance metadata)"


def _reachable(endpoint: str, timeout: float = 3.0) -> tuple[bool, str]:
    from torchport.runtime.doctor import connect_error

    u = urllib.parse.urlsplit(endpoint)
    host, port = u.hostname, u.port or (443 if u.scheme == "https" else 80)
    e = connect_error(host, port, timeout)
    if e is None:
        return True, f"{host}:{port} accepts connections"
    return False, f"{host}:{port}: {e.strerror or e}"


def store_report(url: str | None = None) -> dict[str, Any] | None:
    """``{"url", "endpoint", "credentials", "reachable", "listable", "detail", "problems"}``, or None when
    no URL is given and no endpoint is configured."""
    from torchport.errors import StorageError
    from torchport.storage import store

    if url is None and not configured():
        return None
    obs_env = os.environ.get("OBS_ENDPOINT") or os.environ.get("TORCHPORT_OBS_ENDPOINT")
    scheme = store.split_url(url)[0] if url else ("obs" if obs_env else "s3")
    out: dict[str, Any] = {"url": url, "scheme": scheme, "endpoint": None, "credentials": _credential_source(scheme),
                           "reachable": None, "listable": None, "detail": [], "problems": []}
    try:
        ep = store.endpoint_for(scheme)
    except StorageError as e:
        out["problems"].append({"id": "store-endpoint", "problem": str(e), "fix": "set the endpoint"})
        return out
    out["endpoint"] = ep or "AWS default for the region"
    if ep:
        ok, detail = _reachable(ep)
        out["reachable"] = ok
        out["detail"].append(detail)
        if not ok:
            out["problems"].append({"id": "store-unreachable",
                                    "problem": f"object-store endpoint {ep} is not reachable ({detail})",
                                    "fix": "check --storage-endpoint / TORCHPORT_STORAGE_ENDPOINT / AWS_ENDPOINT_URL "
                                           "and the network"})
            return out
    if url:
        ok, detail = store.bucket_listable(url)
        out["listable"] = ok
        out["detail"].append(detail)
        if not ok:   # the StorageError line is "what is wrong; the fix": missing bucket, denied, unreachable ...
            problem, _, fix = detail.partition("; ")
            out["problems"].append({"id": "store-bucket", "problem": problem,
                                    "fix": fix or "check the bucket name, the credentials and the bucket policy"})
    return out
