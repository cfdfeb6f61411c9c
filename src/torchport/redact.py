"""Secrets never leave the process: one redaction function for every output path (text, JSON, logs, reports,
error lines). What it hides:

* URL userinfo: ``http://user:secret@host`` -> ``http://***@host``;
* credentials in query strings (presigned URLs): ``X-Amz-Signature``, ``X-Amz-Credential``,
  ``X-Amz-Security-Token``, ``Signature``, ``AWSAccessKeyId``, ``token``, ``secret``, ``password``, ... -> ``***``;
* AWS access key ids (``AKIA…`` / ``ASIA…``) and the values of the credential environment variables
  (``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ACCESS_KEY_ID``, their OBS twins) wherever they appear.

Example::

    >>> redact("endpoint http://bob:hunter2@127.0.0.1:9000")
    'endpoint http://***@127.0.0.1:9000'
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["redact", "redact_obj", "SECRET_ENV"]

#: Environment variables whose values are secrets (any appearance of the value is hidden).
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID",
              "OBS_SECRET_ACCESS_KEY", "OBS_ACCESS_KEY_ID", "OBS_SECURITY_TOKEN", "TORCHPORT_STORAGE_SECRET_KEY")
MASK = "***"
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)([^/\s@'\"<>]+)@")
_QUERY = re.compile(r"([?&;](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|Signature|AWSAccessKeyId|"
                    r"x-obs-security-token|AccessKeyId|sig|token|access_token|secret|password|passwd|api_key|apikey|"
                    r"key)=)([^&#\s'\"<>]+)", re.IGNORECASE)
_ACCESS_KEY = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")


def redact(text: Any) -> Any:
    """``text`` with every secret replaced by ``***`` (non-strings are returned unchanged)."""
    if not isinstance(text, str) or not text:
        return text
    out = _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    out = _QUERY.sub(lambda m: m.group(1) + MASK, out)
    out = _ACCESS_KEY.sub(MASK, out)
    for name in SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4 and value in out:
            out = out.replace(value, MASK)
    return out


def redact_obj(obj: Any) -> Any:
    """:func:`redact` over every string of a JSON-like object (dicts, lists, tuples; keys too)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v) for v in obj) if isinstance(obj, list) else tuple(redact_obj(v) for v in obj)
    return obj
