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
__all__ = ["Dtypes", "Formats", "instantiate_tests", "instantiate_ops_tests", "feed_data", "gen_op_input",
           "gen_ops_testcase"]


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


def gen_op_input(testcase, func, op_info):
    """The axes one OpInfo test runs over: ``{"dtype": ..., "npu_format": ...}`` (the method's tags, else the
    OpInfo's; ``test_variant_consistency_eager`` takes one dtype, float32 when the op has it)."""
    dtypes = func.dtypes if hasattr(func, "dtypes") else op_info.dtypesIfNPU
    if "test_variant_consistency_eager" in testcase:
        dtypes = {torch.float32} if torch.float32 in op_info.dtypesIfNPU else {list(op_info.dtypesIfNPU)[-1]}
    return {"dtype": dtypes, "npu_format": func.formats if hasattr(func, "formats") else op_info.formats}


def gen_ops_testcase(cls, func, name, keys, value, op_info):
    """Set ``<func>_<op name>[_<npu_format>][_<dtype>]`` on ``cls``: ``func`` with the combination and ``op=``."""
    test_name = f"{func.__name__}_{name}"
    for key, v in zip(keys, value):
        if key in ("npu_format", "dtype"):
            test_name += _suffix("dtype" if key == "dtype" else "format", v)
    method = functools.partialmethod(func, op=op_info, **dict(zip(keys, value)))
    setattr(cls, test_name, method)
    for deco in op_info.get_decorators(cls.__name__, func.__name__, "cpu", value[0], {}):
        setattr(cls, test_name, deco(method))


def instantiate_ops_tests(op_db):
    """Class decorator: each ``test_*`` method becomes one test per OpInfo of ``op_db`` and dtype / npu_format."""
    def expand(cls):
        for name in [n for n in dir(cls) if n.startswith("test_")]:
            func = getattr(cls, name)
            for info in op_db:
                axes = gen_op_input(name, func, info)
                for combo in itertools.product(*axes.values()):
                    gen_ops_testcase(cls, func, info.name, list(axes), combo, info)
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
