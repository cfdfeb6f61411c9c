"""``torch_npu._inductor`` (emulated): torch_npu registers its Inductor backend on import. The emulated
NPU has no Inductor codegen; importing this registers nothing, and ``torch.compile`` on npu tensors runs
the eager fallback of TorchDynamo's default backend."""

__torchport_emulated__ = True
__all__ = []
