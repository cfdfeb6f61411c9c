"""Errors raised by :mod:`torchport.data`; each message names the file and the fix."""

from __future__ import annotations

from torchport.errors import ExitCode

__all__ = [
    "DataError",
    "SourceError",
    "ShardFormatError",
    "ShardCorruptError",
    "ChecksumMismatchError",
    "SampleChecksumError",
    "CorruptSampleError",
]


class DataError(RuntimeError):
    """Base class of every torchport.data error."""

    exit_code = ExitCode.DATA


class SourceError(DataError):
    """A source directory cannot be read or is not in ImageFolder layout."""


class ShardFormatError(DataError):
    """A directory is not a torchport shard set, or its manifest / index is malformed."""


class ShardCorruptError(DataError):
    """A shard file is truncated or damaged; the message names the shard and the byte offset."""


class ChecksumMismatchError(ShardCorruptError):
    """A shard or the index no longer matches the checksum recorded when it was packed."""


class SampleChecksumError(ChecksumMismatchError):
    """One sample's bytes no longer match the crc32 recorded when it was packed (checked on every read).

    The data pipeline treats it like an undecodable sample: skipped and counted under ``corrupt="skip"``,
    the run stops under ``"error"`` -- the damaged bytes are never trained on."""


class CorruptSampleError(DataError):
    """One sample cannot be decoded (raised when the corrupt-sample policy is ``"error"``)."""
