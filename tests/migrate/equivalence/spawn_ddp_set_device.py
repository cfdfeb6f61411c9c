"""Re-creates the moco / simsiam main_moco.py pattern: `mp.spawn(main_worker, nprocs=ngpus_per_node)` with
`ngpus_per_node = torch.cuda.device_count()`, `torch.cuda.set_device(gpu)`, `model.cuda(gpu)`,
`DistributedDataParallel(model, device_ids=[gpu])` and `.cuda(gpu, non_blocking=True)` batches."""
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def main_worker(gpu, ngpus_per_node, port):
    dist.init_process_group(backend="nccl", init_method=f"tcp://127.0.0.1:{port}", world_size=ngpus_per_node,
                            rank=gpu)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    torch.cuda.set_device(gpu)
    model.cuda(gpu)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    criterion = nn.CrossEntropyLoss().cuda(gpu)
    optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(1 + gpu)
    for step in range(4):
        images = torch.randn(8, 8, generator=g).cuda(gpu, non_blocking=True)
        target = torch.randint(0, 4, (8,), generator=g).cuda(gpu, non_blocking=True)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    ngpus_per_node = torch.cuda.device_count()
    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, free_port()))
    print("trained on", ngpus_per_node, "process(es)")
