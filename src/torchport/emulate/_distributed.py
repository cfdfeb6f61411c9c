"""The ``hccl`` process-group backend of the emulated NPU, delegating to gloo.

``torch.distributed.init_process_group("hccl")`` (what Ascend code calls, and what
``torch.distributed.get_default_backend_for_device("npu")`` returns) creates an
:class:`EmulatedHcclGroup`: a Python ``ProcessGroup`` that takes npu tensors, runs the
collective with gloo on the host tensors behind them (in place, so the npu tensors
see the result) and hands back an already-completed work object. Like HCCL, it
refuses CPU tensors.

Collectives run synchronously: DDP's overlap of communication with backward is not
emulated (the numbers are the same, the timing is not).

Start-up robustness: every rank builds exactly one gloo group on the prefix store
torch hands to the backend factory, and waits for it before returning, so no
collective can race the connection set-up.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch

from torchport.emulate import _tensor as T
from torchport.emulate._state import STATE

__all__ = ["register", "EmulatedHcclGroup", "BACKEND_NAME"]

BACKEND_NAME = "hccl"
_registered: list[bool] = []


def _host(tensors: Any, what: str) -> Any:
    if isinstance(tensors, (list, tuple)):
        return [_host(t, what) for t in tensors]
    if not isinstance(tensors, torch.Tensor) or tensors.device.type != "npu" or tensors.layout != torch.strided:
        raise RuntimeError("Tensors must be NPU and dense")  # ProcessGroupHCCL's wording
    if not tensors.is_contiguous():
        raise RuntimeError("Tensors must be contiguous")
    return T.host(tensors)  # gloo works in place on the npu tensor's own bytes


class _Completed(torch.distributed._Work):
    """A finished collective; its future holds the (npu) result tensors."""

    def __init__(self, result: Any) -> None:
        super().__init__()
        self._result = result

    def wait(self, timeout: timedelta | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def result(self) -> Any:
        return self._result

    def get_future(self) -> torch.futures.Future:
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(self._result)
        return fut


class EmulatedHcclGroup(torch.distributed.ProcessGroup):
    """``hccl`` for emulated npu tensors: gloo on the host buffers behind them.

    Args:
        store, rank, size, timeout: as torch passes them to a backend factory.
    """

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._gloo = torch.distributed.ProcessGroupGloo(store, rank, size, timeout=timeout)
        self._gloo.barrier().wait()  # all ranks connected before the group is handed out

    # -- identity ------------------------------------------------------------------------
    def getBackendName(self) -> str:
        return BACKEND_NAME

    def name(self) -> str:
        return BACKEND_NAME

    def getRank(self) -> int:
        return self._rank

    def getSize(self) -> int:
        return self._size

    # -- collectives (names and signatures of torch's ProcessGroup) ----------------------
    def _run(self, result: Any, work: Any) -> _Completed:
        work.wait()
        return _Completed(result)

    def allreduce(self, tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.AllreduceOptions()
        if not isinstance(opts, torch.distributed.AllreduceOptions):  # a ReduceOp
            op, opts = opts, torch.distributed.AllreduceOptions()
            opts.reduceOp = op
        return self._run(tensors, self._gloo.allreduce(_host(tensors, "allreduce"), opts))

    def allreduce_coalesced(self, tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.AllreduceCoalescedOptions()
        return self._run(tensors, self._gloo.allreduce_coalesced(_host(tensors, "allreduce_coalesced"), opts))

    def broadcast(self, tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.BroadcastOptions()
        return self._run(tensors, self._gloo.broadcast(_host(tensors, "broadcast"), opts))

    def allgather(self, output_tensors: list, input_tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.AllgatherOptions()
        outs = _host(output_tensors, "allgather")
        return self._run(output_tensors, self._gloo.allgather(outs, _host(input_tensors, "allgather"), opts))

    def _allgather_base(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.AllgatherOptions()
        out_h, in_h = _host(output, "all_gather_into_tensor"), _host(input, "all_gather_into_tensor")
        # any output layout holding W inputs back to back (concatenated, stacked, or (1, W*n) as SyncBatchNorm uses)
        outs = [c.view(in_h.shape) for c in out_h.view(-1).chunk(self._size)]
        return self._run([output], self._gloo.allgather([outs], [in_h.contiguous()], opts))

    def allgather_into_tensor_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.AllgatherOptions()
        return self._run(outputs, self._gloo.allgather_into_tensor_coalesced(
            _host(outputs, "allgather_into_tensor_coalesced"), _host(inputs, "allgather_into_tensor_coalesced"), opts))

    def reduce_scatter(self, output_tensors: list, input_tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.ReduceScatterOptions()
        return self._run(output_tensors, self._gloo.reduce_scatter(
            _host(output_tensors, "reduce_scatter"), _host(input_tensors, "reduce_scatter"), opts))

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.ReduceScatterOptions()
        return self._run([output], self._gloo._reduce_scatter_base(
            _host(output, "reduce_scatter_tensor"), _host(input, "reduce_scatter_tensor"), opts))

    def reduce(self, tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.ReduceOptions()
        return self._run(tensors, self._gloo.reduce(_host(tensors, "reduce"), opts))

    def gather(self, output_tensors: list, input_tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.GatherOptions()
        return self._run(output_tensors, self._gloo.gather(
            _host(output_tensors, "gather"), _host(input_tensors, "gather"), opts))

    def scatter(self, output_tensors: list, input_tensors: list, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.ScatterOptions()
        return self._run(output_tensors, self._gloo.scatter(
            _host(output_tensors, "scatter"), _host(input_tensors, "scatter"), opts))

    def alltoall_base(self, output: Any, input: Any, output_split_sizes: list, input_split_sizes: list,
                      opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.AllToAllOptions()
        return self._run([output], self._gloo.alltoall_base(
            _host(output, "all_to_all_single"), _host(input, "all_to_all_single"),
            output_split_sizes, input_split_sizes, opts))

    def send(self, tensors: list, dst: int, tag: int = 0) -> _Completed:
        return self._run(tensors, self._gloo.send(_host(tensors, "send"), dst, tag))

    def recv(self, tensors: list, src: int, tag: int = 0) -> _Completed:
        return self._run(tensors, self._gloo.recv(_host(tensors, "recv"), src, tag))

    def barrier(self, opts: Any = None) -> _Completed:
        opts = opts if opts is not None else torch.distributed.BarrierOptions()
        return self._run(None, self._gloo.barrier(opts))

    # torch 2.14's names for the single-tensor forms (dist.all_gather_into_tensor, SyncBatchNorm, ...)
    def all_gather_single(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        return self._allgather_base(output, input, opts)

    def reduce_scatter_single(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        return self._reduce_scatter_base(output, input, opts)

    def all_to_all_single(self, output: Any, input: Any, output_split_sizes: list, input_split_sizes: list,
                          opts: Any = None) -> _Completed:
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def all_gather_single_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> _Completed:
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> EmulatedHcclGroup:
    if not STATE.installed:
        raise RuntimeError("hccl (emulated): the emulated NPU is not installed in this process "
                           "(set TORCHPORT_EMULATE=npu[:N] or call torchport.emulate.install())")
    return EmulatedHcclGroup(store, rank, size, timeout)


def register() -> None:
    """Register ``hccl`` for device ``npu`` with torch.distributed (once per process)."""
    if _registered:
        return
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["npu"])
    _registered.append(True)
