"""`import torch_npu` and `transfer_to_npu` at the top of an Ascend script."""
import torch
import torch_npu  # noqa: F401

x = torch.ones(2).npu()
print(x.device)
