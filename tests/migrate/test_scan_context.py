"""Findings judged in context (issue 38 item 5): each class of miss and of false alarm that the labelled
benchmark (tools/scan_labels.py, docs/scan_accuracy.md) found, re-created in snippets of our own."""

from __future__ import annotations

import textwrap

from torchport.migrate import catalog, fix_source, scan_source

DEFAULT = [r.code for r in catalog.rules() if r.default_enabled]


def _scan(src: str) -> list[tuple[int, str, str]]:
    res = scan_source(textwrap.dedent(src), "snippet.py", select=DEFAULT)
    assert res.error is None
    return [(f.line, f.code, f.fix_safety) for f in res.findings]


def _codes(src: str) -> list[tuple[int, str]]:
    return [(line, code) for line, code, _ in _scan(src)]


# -- misses -------------------------------------------------------------------------------------------------
def test_legacy_type_strings_are_found():
    src = """
    import torch

    def split(params):
        for p in params:
            if p.type() in ["torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor"]:
                low.append(p)
            elif p.type() == "torch.cuda.FloatTensor":
                high.append(p)
            else:
                raise TypeError("wanted torch.cuda.FloatTensor, torch.cuda.HalfTensor")
        assert p.grad.type() == "torch.cuda.FloatTensor"
    """
    assert _codes(src) == [(6, "TP106"), (6, "TP106"), (8, "TP106"), (12, "TP106")]  # not the error message


def test_device_names_held_as_data_are_found():
    src = """
    import torch
    device = getattr(args, "device", "cuda")
    if d in ["cuda", "xpu"]:
        pass
    if d in ("cuda", "npu"):
        pass
    name = getattr(args, "name", "resnet")
    """
    assert _codes(src) == [(3, "TP104"), (4, "TP104")]
    fixed = fix_source(textwrap.dedent(src), select=DEFAULT)
    assert 'getattr(args, "device", torchport.current().type)' in fixed
    assert '"xpu"]' in fixed and '("cuda", "npu")' in fixed


def test_collective_backend_in_capitals_is_found():
    src = """
    import torch
    import torch.distributed as dist
    dist.init_process_group(backend="NCCL" if torch.cuda.is_available() else "GLOO")
    print("NCCL ready")
    """
    assert (4, "TP301") in _codes(src)
    assert all(line != 5 for line, _ in _codes(src))


# -- false alarms -------------------------------------------------------------------------------------------
def test_cuda_npu_chain_and_paired_flags_are_left_alone():
    src = """
    import torch

    class Prefetcher:
        def __init__(self, device):
            self.is_cuda = device.type == "cuda" and torch.cuda.is_available()
            self.is_npu = device.type == "npu" and torch.npu.is_available()

        def __iter__(self):
            if self.is_cuda:
                stream = torch.cuda.Stream(device=self.device)
            elif self.is_npu:
                stream = torch.npu.Stream(device=self.device)
            else:
                stream = None
    """
    assert _codes(src) == []


def test_a_cuda_only_chain_is_still_reported():
    src = """
    import torch

    def pick(device):
        if device.type == "cuda":
            return torch.cuda.Stream()
        elif device.type == "xpu":
            return torch.xpu.Stream()
    """
    assert (6, "TP116") in _codes(src)   # no npu branch: the npu gets nothing


def test_device_table_with_npu_entry_is_left_alone():
    src = """
    dist_backends = {"xpu": "ccl", "cuda": "nccl", "npu": "hccl"}
    only_cuda = {"cuda": "nccl", "cpu": "gloo"}
    """
    assert _codes(src) == [(3, "TP301")]


def test_if_else_on_collective_backend_is_left_alone():
    src = """
    import torch
    import torch.distributed as dist

    def sync():
        if dist.get_backend() == dist.Backend.NCCL:
            dist.barrier(device_ids=[torch.cuda.current_device()])
        else:
            dist.barrier()

    def only():
        if dist.get_backend() == "nccl":
            torch.cuda.synchronize()
    """
    assert _codes(src) == [(12, "TP301"), (13, "TP113")]   # no else: the other backends are not served


def test_values_only_logged_are_left_alone():
    src = """
    import logging
    import torch
    logger = logging.getLogger(__name__)
    logger.info(f"{torch.backends.cudnn.allow_tf32=}")
    print(x.is_cuda)
    torch.backends.cudnn.allow_tf32 = True
    logger.info(torch.cuda.memory_summary())
    """
    assert [line for line, _ in _codes(src)] == [7, 8]   # a setting and a CUDA call stay reported


def test_guard_of_a_cuda_only_kernel_is_reported_without_a_fix():
    src = """
    import torch
    from mypkg import _C

    def forward(x):
        if not x.is_cuda:
            return portable(x)
        return _C.fused_forward(x)

    def backward(g):
        if not g.is_cuda:
            raise NotImplementedError("no kernel here")
        out = g.new_empty(g.shape)
        _C.fused_backward(g, out)
        return out

    def plain(x):
        if x.is_cuda:
            x = x.cpu()
        return x
    """
    assert _scan(src) == [(6, "TP105", "none"), (11, "TP105", "none"), (18, "TP105", "safe")]
    res = scan_source(textwrap.dedent(src), "snippet.py", select=DEFAULT)
    assert "`_C.fused_forward`" in res.findings[0].message and "not rewritten" in res.findings[0].message
    fixed = fix_source(textwrap.dedent(src), select=DEFAULT)
    assert "if not x.is_cuda:" in fixed and "if not g.is_cuda:" in fixed   # never rewritten
    assert "if (x.device.type == torchport.current().type):" in fixed      # the plain one is


def test_caffe2_files_keep_their_device_names():
    src = """
    from caffe2.python import core
    assert t.device.type in ["cpu", "cuda"]
    style = "gpu" if caffe2_style else "cuda"
    """
    assert _codes(src) == []


def test_assert_naming_a_cuda_only_library_is_left_alone():
    src = """
    import torch
    assert torch.cuda.is_available(), "CUDA required for APEX optimizers"
    assert torch.cuda.is_available(), "CUDA is required for AMP training"
    """
    assert _codes(src) == [(4, "TP110")]


def test_device_ids_passed_through_are_left_alone():
    src = """
    from torch.nn.parallel import DistributedDataParallel as DDP

    def wrap(model, device_ids=None):
        return DDP(model, device_ids=device_ids)

    def mine(model, local_rank):
        return DDP(model, device_ids=[local_rank])
    """
    assert [code for _, code in _codes(src)] == ["TP302"]
    assert _codes(src)[0][0] == 8


def test_apex_fallback_and_probes_are_quiet():
    src = """
    try:
        from apex import amp
    except ImportError:
        amp = None

    def state(opt):
        if "state_dict" in amp.__dict__:
            return amp.state_dict()
    """
    lines = [line for line, code in _codes(src) if code == "TP210"]
    assert 5 not in lines and 8 not in lines and 9 in lines
