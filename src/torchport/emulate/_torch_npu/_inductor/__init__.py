"""``torch_npu._inductor`` (emulated): torch_npu registers its Inductor backend on import. The emulated
NPU has no Inductor codegen of its own; importing this registers nothing: the emulator's install already
routes ``torch.compile``'s default backend so that Inductor compiles npu graphs with its CPU code
generator on their host view (``torchport/emulate/_compile.py``)."""

__torchport_emulated__ = True
__all__ = []
