"""Ascend tuning knobs: jit compile mode, internal formats, hf32."""
import torch
import torch_npu

torch_npu.npu.set_compile_mode(jit_compile=False)
torch.npu.config.allow_internal_format = False
torch.npu.matmul.allow_hf32 = False
x = torch.ones(2, 2).npu()
print((x @ x).sum().item())
