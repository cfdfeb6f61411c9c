"""``torchair`` (emulated): Ascend's GE graph-mode backend for ``torch.compile``, stood in for on the emulator.

``torchair.get_npu_backend(compiler_config=CompilerConfig())`` returns a Dynamo backend. The card's backend
lowers the AOT-autograd graphs to GE; here the same AOT-autograd graphs (forward and backward) run op by op
on the emulated npu (torch's ``aot_eager``), so the emulator's npu numerics (``set_numerics``, card rules)
apply inside compiled code as in eager. ``CompilerConfig``'s options are accepted and have no effect.
Served only while the emulator is installed and no real torchair is importable.
"""

from __future__ import annotations

import types
from typing import Any

__torchport_emulated__ = True
__all__ = ["CompilerConfig", "get_npu_backend", "get_compiler"]


class _Options(types.SimpleNamespace):
    """A config group (``config.experimental_config``, ``config.debug.graph_dump``): any attribute may be set."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Options()
        setattr(self, name, value)
        return value


class CompilerConfig(_Options):
    """torchair's compiler options (``mode``, ``experimental_config.*``, ``debug.*``, ``dump_config.*`` ...):
    accepted, recorded, without effect on the emulator."""

    def __init__(self) -> None:
        super().__init__(mode="max-autotune")


def get_compiler(compiler_config: CompilerConfig | None = None) -> Any:
    """The graph compiler torchair hands to AOT autograd: on the emulator, the traced graph itself."""
    return lambda gm, example_inputs: gm


def get_npu_backend(*, compiler_config: CompilerConfig | None = None, custom_decompositions: Any = None) -> Any:
    """A Dynamo backend for ``torch.compile(model, backend=...)``: AOT autograd, graphs run on the emulated npu."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_compiler

    compiler = make_boxed_compiler(get_compiler(compiler_config))
    kwargs: dict[str, Any] = {"fw_compiler": compiler, "bw_compiler": compiler}
    if custom_decompositions:
        kwargs["decompositions"] = dict(custom_decompositions)
    return aot_autograd(**kwargs)
