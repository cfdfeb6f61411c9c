"""``torch_npu.testing.testcase`` (emulated): ``TestCase`` and ``run_tests`` for torch_npu-style tests."""

from __future__ import annotations

import os
import random
import unittest
from collections.abc import Sequence

import numpy as np
import torch
from torch.testing._internal import common_utils as _torch_testing

from torch_npu.testing.common_utils import set_npu_device

__torchport_emulated__ = True
__all__ = ["TestCase", "run_tests"]


def run_tests() -> None:
    """``unittest.main()`` over the calling module (what ``python test_x.py`` runs)."""
    unittest.main()


def _as_numpy(x):
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class TestCase(_torch_testing.TestCase):
    """torch's ``TestCase`` plus torch_npu's comparison helpers.

    ``assertEqual`` also takes torch_npu's ``prec=`` (an absolute tolerance) and ``message=``;
    ``assertRtolEqual`` compares element-wise with a relative-or-absolute tolerance
    (``prec``, ``prec16`` for float16/bfloat16), NaNs in the same places, same shape and dtype.
    """

    _precision = 1e-5
    maxDiff = None
    exact_dtype = False

    @property
    def precision(self) -> float:
        return self._precision

    @precision.setter
    def precision(self, prec: float) -> None:
        self._precision = prec

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.npu_device = set_npu_device()

    def setUp(self) -> None:
        super().setUp()
        seed = int(os.getenv("SEED", "666"))
        torch.manual_seed(seed)
        random.seed(seed)

    def assertEqual(self, x, y, *args, prec=None, message="", **kwargs):  # noqa: N802 - unittest's style
        if args and isinstance(args[0], (int, float)) and not isinstance(args[0], bool) and prec is None:
            prec, args = args[0], args[1:]
        if args and (args[0] is None or isinstance(args[0], str)):  # torch's positional msg
            message, args = args[0] or message, args[1:]
        kwargs.pop("allow_inf", None)
        msg = kwargs.pop("msg", None) or message or None
        if prec is not None and "atol" not in kwargs:
            kwargs.update(atol=prec, rtol=0)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            x, y = torch.as_tensor(np.asarray(x)), torch.as_tensor(np.asarray(y))
            kwargs.setdefault("exact_dtype", False)
        storages = (torch.UntypedStorage, torch.storage.TypedStorage)
        if isinstance(x, storages) and isinstance(y, storages):
            # torch_npu's assertEqual compares iterables element by element, numbers without their dtype
            # (torch's compares typed storages as tensors, dtype included, and untyped ones by identity)
            x, y = torch.tensor(x.cpu().tolist()), torch.tensor(y.cpu().tolist())
            kwargs.setdefault("exact_dtype", False)
        return super().assertEqual(x, y, *args, msg=msg, **kwargs)

    def assertRtolEqual(self, x, y, prec=1.e-4, prec16=1.e-3, auto_trans_dtype=False,  # noqa: N802
                        message=None):
        if isinstance(x, Sequence) and isinstance(y, Sequence) and not isinstance(x, str):
            self.assertEqual(len(x), len(y), message=message or "length error")
            for a, b in zip(x, y):
                self.assertRtolEqual(a, b, prec, prec16, auto_trans_dtype, message)
            return
        if torch.is_tensor(x) and not torch.is_tensor(y) and not isinstance(y, np.ndarray):
            y = torch.as_tensor(y, dtype=x.dtype)
        elif torch.is_tensor(y) and not torch.is_tensor(x) and not isinstance(x, np.ndarray):
            x = torch.as_tensor(x, dtype=y.dtype)
        if torch.is_tensor(x) and torch.is_tensor(y):
            if auto_trans_dtype:
                x = x.to(y.dtype)
            if x.dtype == torch.bfloat16 or y.dtype == torch.bfloat16:
                if x.shape != y.shape or x.dtype != y.dtype:
                    self.fail(message or "shape error!")
                if not torch.allclose(x.detach().cpu().float(), y.detach().cpu().float(), rtol=prec16, atol=prec16,
                                      equal_nan=True):
                    self.fail(message or "result error!")
                return
        a, b = _as_numpy(x), _as_numpy(y)
        if a.shape != b.shape:
            self.fail(message or f"shape error: {a.shape} vs {b.shape}")
        if a.dtype != b.dtype:
            self.fail(message or f"dtype error: {a.dtype} vs {b.dtype}")
        if a.dtype == np.bool_:
            if not np.array_equal(a, b):
                self.fail(message or "result error")
            return
        if not (np.issubdtype(a.dtype, np.number)):
            self.fail(message or f"unsupported dtype {a.dtype}")
        tol, tiny = (prec16, 6e-8) if a.dtype == np.float16 else (prec, 1e-9)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan = np.isnan(a64)
        if not np.array_equal(nan, np.isnan(b64)):
            self.fail(message or "result error: NaNs in different places")
        diff = np.abs(np.where(nan, 0.0, b64 - a64))
        with np.errstate(invalid="ignore"):
            diff = np.where(np.isinf(a64) & (a64 == b64), 0.0, diff)
        bad_abs = diff > tol
        bad_rel = diff / (np.maximum(np.abs(a64), np.abs(b64)) + tiny) > tol
        allowed = a.size * tol  # torch_npu tolerates a few outliers: at most size * tol elements
        if bad_abs.all(axis=None) if a.size == 0 else False:
            return
        if (bad_rel.any() and bad_abs.any()) and bad_rel.sum() > allowed and bad_abs.sum() > allowed:
            self.fail(message or f"result error: max abs diff {diff.max():.3g} over {tol}")
