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
_C = torch._C._distributed_c10d  # the option structs (torch.distributed does not re-export AllgatherOptions)
_RED = torch.distributed.ReduceOp.RedOpType


def _options(cls: Any, opts: Any = None, op: Any = None, timeout: Any = None) -> Any:
    """A fresh ``cls`` options struct (the caller's is never changed) from whichever way the caller spelled
    it: the struct, ``None``, a bare ``ReduceOp`` in its place (``pg.allreduce(t, ReduceOp.MAX)``) or
    ``op=`` / ``timeout=`` keywords."""
    fresh = cls()
    if isinstance(opts, cls):
        for field in ("reduceOp", "timeout", "rootRank", "rootTensor", "asyncOp"):
            if hasattr(fresh, field):
                setattr(fresh, field, getattr(opts, field))
    elif opts is not None:
        op = opts
    if op is not None:
        fresh.reduceOp = op
    if timeout is not None:
        fresh.timeout = timeout
    return fresh


def _host(tensors: Any, what: str) -> Any:
    if isinstance(tensors, (list, tuple)):
        return [_host(t, what) for t in tensors]
    if not isinstance(tensors, torch.Tensor) or tensors.device.type != "npu" or tensors.layout != torch.strided:
        raise RuntimeError("Tensors must be NPU and dense")  # ProcessGroupHCCL's wording
    if not tensors.is_contiguous():
        raise RuntimeError("Tensors must be contiguous")
    return T.host(tensors)  # gloo works in place on the npu tensor's own bytes


class _Completed(torch.distributed._Work):
    """A collective's work; its future holds the (npu) result tensors. Finished already, or -- issued inside
    ``_group_start()``/``_group_end()`` -- finished by the group's end (or by waiting for it)."""

    def __init__(self, result: Any, pending: Any = None) -> None:
        super().__init__()
        self._result = result
        self._pending = pending

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self._pending is not None:
            self._pending.wait()
            self._pending = None
        return True

    def is_completed(self) -> bool:
        return self._pending is None or self._pending.is_completed()

    def is_success(self) -> bool:
        return True

    def result(self) -> Any:
        return self._result

    def get_future(self) -> torch.futures.Future:
        self.wait()
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(self._result)
        return fut


class _Done:
    """A gloo work already waited for."""

    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


_DONE = _Done()


class _HcclBackend:
    """What ``group._get_backend(torch.device("npu"))`` hands out: the gloo backend behind the group, plus the
    members of torch_npu's ``ProcessGroupHCCL`` that scripts call on it (``_group_start``/``_group_end``,
    HCCL's ``HcclGroupStart``/``HcclGroupEnd``). Everything else is the gloo backend's."""

    def __init__(self, group: EmulatedHcclGroup) -> None:
        self._group = group

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group._gloo, name)

    def _group_start(self) -> None:
        self._group._group_start()

    def _group_end(self) -> None:
        self._group._group_end()


class EmulatedHcclGroup(torch.distributed.ProcessGroup):
    """``hccl`` for emulated npu tensors: gloo on the host buffers behind them.

    The group registers its gloo backend for device ``npu`` with torch, so it carries the group name that
    device meshes, DTensor and the functional collectives (FSDP2) look groups up by; every collective still
    comes through the methods below, which hand gloo the host views. What HCCL does and gloo does not is
    added here as torch_npu does it: ``ReduceOp.PREMUL_SUM`` (scale, then SUM) and ``ReduceOp.AVG`` on
    integer tensors (SUM, then a truncating division by the group size -- torch_npu's behaviour on the SoCs
    that define it; gloo refuses integer AVG).

    Args:
        store, rank, size, timeout: as torch passes them to a backend factory.
    """

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._gloo = torch.distributed.ProcessGroupGloo(store, rank, size, timeout=timeout)
        self._gloo.barrier().wait()  # all ranks connected before the group is handed out
        # Without a registered backend a Python group has no name ("ProcessGroup name not set"), and
        # init_device_mesh / funcol cannot resolve it. torch sets the name on this backend after the factory.
        self._register_backend(torch.device("npu"), torch.distributed.ProcessGroup.BackendType.CUSTOM, self._gloo)
        self._group_depth = 0
        self._pending: list = []

    def _get_backend(self, device: Any) -> Any:
        backend = super()._get_backend(device)
        return _HcclBackend(self) if torch.device(device).type == "npu" else backend

    # -- HCCL's grouping (HcclGroupStart/End): collectives and send/recv issued in between run together --------
    def _group_start(self) -> None:
        self._group_depth += 1

    def _group_end(self) -> None:
        if self._group_depth == 0:
            raise RuntimeError("_group_end() without a matching _group_start()")
        self._group_depth -= 1
        if self._group_depth == 0:
            pending, self._pending = self._pending, []
            for done in pending:   # issued without waiting (a send and a recv in any order cannot block)
                done.wait()        # once: a gloo recv waited for twice waits for a second message

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
        if self._group_depth:
            done = _Completed(result, work)
            self._pending.append(done)
            return done
        work.wait()
        return _Completed(result)

    def _reducing(self, opts: Any, outs: list, ins: list, call: Any) -> Any:
        """Run ``call(ins, opts)`` on gloo, turning what gloo lacks into SUM as HCCL does (see the class doc)."""
        kind = opts.reduceOp.op
        if kind == _RED.PREMUL_SUM:
            factor = opts.reduceOp.factor
            if ins is outs:            # in place (allreduce): the output is the input
                for t in ins:
                    t.mul_(factor)
            else:
                ins = [t * factor for t in ins]
            opts.reduceOp = _RED.SUM
        elif kind == _RED.AVG and any(not (t.is_floating_point() or t.is_complex()) for t in outs):
            opts.reduceOp = _RED.SUM
            call(ins, opts).wait()
            for t in outs:
                t.div_(self._size, rounding_mode="trunc")
            return _DONE
        return call(ins, opts)

    def allreduce(self, tensors: Any, opts: Any = None, *, op: Any = None, timeout: Any = None) -> _Completed:
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else tensors
        hosts = _host(tensors, "allreduce")
        return self._run(tensors, self._reducing(_options(_C.AllreduceOptions, opts, op, timeout), hosts, hosts,
                                                 self._gloo.allreduce))

    def allreduce_coalesced(self, tensors: list, opts: Any = None) -> _Completed:
        hosts = _host(tensors, "allreduce_coalesced")
        return self._run(tensors, self._reducing(_options(_C.AllreduceCoalescedOptions, opts), hosts, hosts,
                                                 self._gloo.allreduce_coalesced))

    def broadcast(self, tensors: Any, opts: Any = None, *, root: int | None = None, timeout: Any = None) -> _Completed:
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else tensors
        if isinstance(opts, int):  # broadcast(tensor, root)
            opts, root = None, opts
        opts = _options(_C.BroadcastOptions, opts, timeout=timeout)
        if root is not None:
            opts.rootRank = root
        return self._run(tensors, self._gloo.broadcast(_host(tensors, "broadcast"), opts))

    def allgather(self, output_tensors: list, input_tensors: Any, opts: Any = None) -> _Completed:
        if isinstance(input_tensors, torch.Tensor):  # allgather([out per rank], tensor)
            output_tensors, input_tensors = [output_tensors], [input_tensors]
        outs = _host(output_tensors, "allgather")
        return self._run(output_tensors, self._gloo.allgather(outs, _host(input_tensors, "allgather"),
                                                              _options(_C.AllgatherOptions, opts)))

    def _allgather_base(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        out_h, in_h = _host(output, "all_gather_into_tensor"), _host(input, "all_gather_into_tensor")
        # any output layout holding W inputs back to back (concatenated, stacked, or (1, W*n) as SyncBatchNorm uses)
        outs = [c.view(in_h.shape) for c in out_h.view(-1).chunk(self._size)]
        return self._run([output], self._gloo.allgather([outs], [in_h.contiguous()], _options(_C.AllgatherOptions, opts)))

    def allgather_into_tensor_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> _Completed:
        for output, input in zip(outputs, inputs, strict=True):   # gloo has no coalesced form: one by one
            self._allgather_base(output, input, opts)
        return _Completed(outputs)

    def reduce_scatter(self, output_tensors: Any, input_tensors: list, opts: Any = None, *, op: Any = None,
                       timeout: Any = None) -> _Completed:
        if isinstance(output_tensors, torch.Tensor):  # reduce_scatter(tensor, [in per rank], op)
            output_tensors, input_tensors = [output_tensors], [input_tensors]
        outs = _host(output_tensors, "reduce_scatter")
        ins = _host(input_tensors, "reduce_scatter")

        def call(i: list, o: Any) -> Any:
            return self._gloo.reduce_scatter(outs, [list(x) for x in i], o)

        opts = _options(_C.ReduceScatterOptions, opts, op, timeout)
        if opts.reduceOp.op == _RED.PREMUL_SUM:   # scale each rank's input list
            ins = [[t * opts.reduceOp.factor for t in x] for x in ins]
            opts.reduceOp = _RED.SUM
        return self._run(output_tensors, self._reducing(opts, outs, ins, call))

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        out_h, in_h = _host(output, "reduce_scatter_tensor"), _host(input, "reduce_scatter_tensor")
        return self._run([output], self._reducing(
            _options(_C.ReduceScatterOptions, opts), [out_h], [in_h],
            lambda i, o: self._gloo._reduce_scatter_base(out_h, i[0], o)))

    def reduce_scatter_tensor_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> _Completed:
        for output, input in zip(outputs, inputs, strict=True):
            self._reduce_scatter_base(output, input, opts)
        return _Completed(outputs)

    def reduce(self, tensors: Any, opts: Any = None, *, root: int | None = None, op: Any = None,
               timeout: Any = None) -> _Completed:
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else tensors
        if isinstance(opts, int):  # reduce(tensor, root, op)
            opts, root = None, opts
        opts = _options(_C.ReduceOptions, opts, op, timeout)
        if root is not None:
            opts.rootRank = root
        hosts = _host(tensors, "reduce")
        return self._run(tensors, self._reducing(opts, hosts, hosts, self._gloo.reduce))

    def gather(self, output_tensors: list, input_tensors: list, opts: Any = None) -> _Completed:
        return self._run(output_tensors, self._gloo.gather(
            _host(output_tensors, "gather"), _host(input_tensors, "gather"), _options(_C.GatherOptions, opts)))

    def scatter(self, output_tensors: list, input_tensors: list, opts: Any = None) -> _Completed:
        return self._run(output_tensors, self._gloo.scatter(
            _host(output_tensors, "scatter"), _host(input_tensors, "scatter"), _options(_C.ScatterOptions, opts)))

    def alltoall_base(self, output: Any, input: Any, output_split_sizes: list, input_split_sizes: list,
                      opts: Any = None) -> _Completed:
        return self._run([output], self._gloo.alltoall_base(
            _host(output, "all_to_all_single"), _host(input, "all_to_all_single"),
            output_split_sizes, input_split_sizes, _options(_C.AllToAllOptions, opts)))

    def send(self, tensors: list, dst: int, tag: int = 0) -> _Completed:
        return self._run(tensors, self._gloo.send(_host(tensors, "send"), dst, tag))

    def recv(self, tensors: list, src: int, tag: int = 0) -> _Completed:
        return self._run(tensors, self._gloo.recv(_host(tensors, "recv"), src, tag))

    def barrier(self, opts: Any = None) -> _Completed:
        return self._run(None, self._gloo.barrier(_options(_C.BarrierOptions, opts)))

    # torch 2.14's names for the single-tensor forms (dist.all_gather_into_tensor, SyncBatchNorm, FSDP2, ...)
    def all_gather_single(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        return self._allgather_base(output, input, opts)

    def reduce_scatter_single(self, output: Any, input: Any, opts: Any = None) -> _Completed:
        return self._reduce_scatter_base(output, input, opts)

    def all_to_all_single(self, output: Any, input: Any, output_split_sizes: list, input_split_sizes: list,
                          opts: Any = None) -> _Completed:
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def all_gather_single_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> _Completed:
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> _Completed:
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)


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
