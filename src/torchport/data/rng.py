"""Counter-based randomness: every random number is a pure function of (seed, epoch, index, k).

A DataLoader gives each worker its own random stream, so per-sample augmentation drawn from
``torch.rand`` / ``random`` changes with ``num_workers`` (0 vs 2 vs 4 give different crops).
Here nothing is drawn from a stream: a uniform number is a hash (SplitMix64's finaliser) of the
sample's coordinates. Results therefore do not depend on worker count, rank layout, device,
or the NumPy version (only integer arithmetic defined by this module is used).

Example::

    u = uniforms(seed=0, epoch=3, indices=np.array([10, 11]), count=4)   # shape (2, 4), in [0, 1)
"""

from __future__ import annotations

import numpy as np

__all__ = ["uniforms", "permutation", "hash64"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, element-wise on a uint64 array (wrap-around multiplication)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _key(seed: int, epoch: int, stream: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = _mix(np.array([(int(seed) * 0x9E3779B97F4A7C15 + 1) & _MASK], dtype=np.uint64))
        h = _mix(h ^ np.uint64((int(epoch) * 0xD1B54A32D192ED03 + 7) & _MASK))
        return _mix(h ^ np.uint64((int(stream) * 0x8CB92BA72F3D8DD7 + 3) & _MASK))


def hash64(seed: int, epoch: int, indices: np.ndarray, count: int, *, stream: int = 0) -> np.ndarray:
    """Raw 64-bit hashes, shape ``(len(indices), count)``, for sample coordinates.

    Args:
        seed: run seed. epoch: epoch number. indices: dataset indices (int array).
        count: how many numbers per sample. stream: separates independent uses
            (shuffle vs augmentation) so they never share numbers.
    """
    idx = np.asarray(indices, dtype=np.int64).astype(np.uint64).reshape(-1)
    with np.errstate(over="ignore"):
        h = _mix(_key(seed, epoch, stream) ^ (idx * _GOLDEN))
        k = (np.arange(1, count + 1, dtype=np.uint64) * _M2)[None, :]
        return _mix(h[:, None] ^ k)


def uniforms(seed: int, epoch: int, indices: np.ndarray, count: int, *, stream: int = 1) -> np.ndarray:
    """Uniform float64 numbers in ``[0, 1)``, shape ``(len(indices), count)``.

    Each row depends only on ``(seed, epoch, index, stream)``.
    """
    return (hash64(seed, epoch, indices, count, stream=stream) >> np.uint64(11)).astype(np.float64) * (2.0**-53)


def permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """A permutation of ``range(n)`` that depends only on ``(n, seed, epoch)``.

    Sorting by a hash key of each index is an exact, platform-independent shuffle
    (ties are impossible in practice and broken by index, since the sort is stable).
    """
    keys = hash64(seed, epoch, np.arange(n), 1, stream=0)[:, 0]
    return np.argsort(keys, kind="stable").astype(np.int64)
