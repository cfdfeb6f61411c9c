"""``torch_npu.testing.decorator`` (emulated): the test generators torch_npu's own test files use.

``@Dtypes(...)`` / ``@Formats(...)`` tag a test method; ``@instantiate_tests`` replaces each tagged method of a
``TestCase`` class by one test per combination (named ``<test>_<format>`` / ``<test>_<dtype name>``, the
combination passed to the parameters whose names contain ``dtype`` / ``format``, and ``device="npu"`` when the
method takes a ``device``), as torch_npu's decorator does. ``instantiate_ops_tests(op_db)`` does the same over
OpInfo entries (``op=``, ``dtype=``, ``npu_format=``).
"""

from __future__ import annotations

import functools
import inspect
import itertools

import torch

__torchport_emulated__ = True
__all__ = ["Dtypes", "Formats", "instantiate_tests", "instantiate_ops_tests", "feed_data"]


def feed_data(func, new_name, *args, **kwargs):
    """``func`` with ``args``/``kwargs`` bound, as a test method named ``new_name``."""
    @functools.wraps(func)
    def test(self):
        return func(self, *args, **kwargs)
    test.__name__ = new_name
    test.__wrapped__ = func
    return test


def _suffix(key: str, value) -> str:
    return "_" + (str(value).split(".")[1] if key == "dtype" else str(value))


def instantiate_tests(cls=None, **kwargs):
    """Class decorator: one test per (dtype, format) combination of each tagged method."""
    def expand(cls):
        for name, func in list(cls.__dict__.items()):
            axes = {k: getattr(func, attr) for k, attr in (("dtype", "dtypes"), ("format", "formats"))
                    if hasattr(func, attr)}
            if not axes:
                continue
            params = inspect.getfullargspec(func).args
            for combo in itertools.product(*axes.values()):
                bound = {"device": "npu"} if "device" in params else {}
                test_name = name
                for key, value in zip(axes, combo):
                    test_name += _suffix(key, value)
                    matches = [p for p in params if key in p]
                    if len(matches) > 1:
                        raise RuntimeError(f"Multiple matches for {key}")
                    bound[matches[0] if matches else None] = value
                setattr(cls, test_name, feed_data(func, test_name, **bound))
            delattr(cls, name)
        return cls
    return expand(cls) if cls is not None else expand


def instantiate_ops_tests(op_db):
    """Class decorator: each ``test_*`` method becomes one test per OpInfo of ``op_db`` and dtype / npu_format."""
    def expand(cls):
        for name in [n for n in dir(cls) if n.startswith("test_")]:
            func = getattr(cls, name)
            for info in op_db:
                dtypes = func.dtypes if hasattr(func, "dtypes") else info.dtypesIfNPU
                if "test_variant_consistency_eager" in name:
                    dtypes = {torch.float32} if torch.float32 in info.dtypesIfNPU else {list(info.dtypesIfNPU)[-1]}
                formats = func.formats if hasattr(func, "formats") else info.formats
                for dtype, fmt in itertools.product(dtypes, formats):
                    test_name = f"{func.__name__}_{info.name}_{str(dtype).split('.')[1]}_{fmt}"
                    method = functools.partialmethod(func, dtype=dtype, npu_format=fmt, op=info)
                    for deco in info.get_decorators(cls.__name__, func.__name__, "cpu", dtype, {}):
                        method = deco(method)
                    setattr(cls, test_name, method)
            delattr(cls, name)
        return cls
    return expand


class Dtypes:
    """``@Dtypes(torch.float16, torch.float32)``: the dtypes a test runs with."""

    def __init__(self, *args):
        if not args:
            raise RuntimeError("No dtypes given")
        if not all(isinstance(a, torch.dtype) for a in args):
            raise RuntimeError(f"Unknown dtype in {args}")
        self.args = args

    def __call__(self, fn):
        fn.dtypes = self.args
        return fn


class Formats:
    """``@Formats(0, 3, 29)``: the npu formats a test runs with."""

    def __init__(self, *args):
        if not args:
            raise RuntimeError("No formats given")
        self.args = args

    def __call__(self, fn):
        fn.formats = self.args
        return fn
