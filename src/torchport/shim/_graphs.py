"""CUDA graphs under the shim: ``torch.cuda.CUDAGraph``, ``torch.cuda.graph``, ``make_graphed_callables``,
``graph_pool_handle``, ``is_current_stream_capturing``.

On a target whose backend record names a graph API (``BackendSpec.graph_api``: ``"NPUGraph"`` for torch_npu and
the emulated npu) the calls go to the device module's own ``<graph_api>`` / ``graph`` / ``make_graphed_callables``
/ ``graph_pool_handle`` / ``is_current_stream_capturing``; elsewhere (the CPU) to the host capture-and-replay of
:mod:`torchport.runtime.graphs`. Either way the script's capture runs, ``replay()`` recomputes the static
outputs from the static inputs (eager's results), and no call reaches the CUDA driver.
"""

from __future__ import annotations

from typing import Any

from torchport.shim._cuda_api import C, _Api

__all__ = ["SECTIONS", "graph_module"]

_NAMES = ("graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing")


def graph_module(api: _Api) -> tuple[Any, Any]:
    """``(graph class, module holding graph / make_graphed_callables / ...)`` for the selected target: the
    backend's own where its record names one and its device module has it, else the host capture's."""
    from torchport.runtime import graphs

    name = getattr(api.target.backend, "graph_api", None) if api.accel else None
    cls = api.fn_of(name) if name else None
    if cls is not None and all(api.fn_of(n) is not None for n in _NAMES):
        return cls, api.mod
    return graphs.HostGraph, graphs


def _graphs(api: _Api) -> dict[str, Any]:
    """The five graph names, on the backend's graph API or the host capture."""
    cls, mod = graph_module(api)
    hit = api.hit
    where = f"{getattr(mod, '__name__', '?')}.{cls.__name__}"

    def cuda_graph(*args: Any, **kwargs: Any) -> Any:
        hit(C + "CUDAGraph", "CUDAGraph()", where)
        return cls(*args, **kwargs)

    def graph(cuda_graph: Any, *args: Any, **kwargs: Any) -> Any:
        hit(C + "graph", "graph(...)", f"{mod.__name__}.graph")
        return mod.graph(cuda_graph, *args, **kwargs)

    def make_graphed_callables(*args: Any, **kwargs: Any) -> Any:
        hit(C + "make_graphed_callables", "make_graphed_callables(...)", f"{mod.__name__}.make_graphed_callables")
        return mod.make_graphed_callables(*args, **kwargs)

    def graph_pool_handle() -> Any:
        hit(C + "graph_pool_handle", "graph_pool_handle()", f"{mod.__name__}.graph_pool_handle")
        return mod.graph_pool_handle()

    def is_current_stream_capturing() -> bool:
        return bool(mod.is_current_stream_capturing())

    api.produces[C + "CUDAGraph"] = (cls,)
    graph_cls = getattr(mod, "graph", None)
    if isinstance(graph_cls, type):
        api.produces[C + "graph"] = (graph_cls,)
    return {C + "CUDAGraph": cuda_graph, C + "graph": graph, C + "make_graphed_callables": make_graphed_callables,
            C + "graph_pool_handle": graph_pool_handle, C + "is_current_stream_capturing": is_current_stream_capturing}


SECTIONS = (_graphs,)
