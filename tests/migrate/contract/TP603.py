"""The `"hccl"` collective backend (Ascend), a one-process group."""
import socket

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


dist.init_process_group(backend="hccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
t = torch.ones(2).to("npu")
dist.all_reduce(t)
dist.destroy_process_group()
print(t.device, t.tolist())
