"""2-process worker for test_emu_multidevice.py: Ascend-style DDP *without* torch.npu.set_device.

Each rank puts its model on npu:<rank> (TORCHPORT_EMULATE=npu:2 gives every process two
emulated cards), wraps it in DDP with SyncBatchNorm, clips gradients and steps. Rank r gets
half of one fixed batch, so SyncBatchNorm must reproduce BatchNorm over the whole batch.
Writes one JSON file per rank into argv[1].
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401
from torch.nn.parallel import DistributedDataParallel as DDP


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))


def main(out_dir: str) -> None:
    rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("hccl")
    world = dist.get_world_size()
    device = torch.device(f"npu:{rank}")
    gen = torch.Generator().manual_seed(1234)
    x_all = torch.randn(4 * world, 3, 6, 6, generator=gen)
    y_all = torch.randint(0, 3, (4 * world,), generator=gen)
    x, y = x_all[4 * rank:4 * rank + 4].to(device), y_all[4 * rank:4 * rank + 4].to(device)

    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(net()).to(device)
    ddp = DDP(model, device_ids=[rank])
    out = ddp(x)
    loss = torch.nn.functional.cross_entropy(out, y)  # DDP averages: the gradient of the global-batch mean
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)

    # reference: plain BatchNorm over the whole batch on the CPU
    ref = net()
    ref_out = ref(x_all)
    ref_loss = torch.nn.functional.cross_entropy(ref_out, y_all)
    ref_loss.backward()
    ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)

    result = {
        "rank": rank,
        "current_device": torch.npu.current_device(),
        "out_device": str(out.device),
        "grad_device": str(model[0].weight.grad.device),
        "out_max_err": float((out.detach().cpu() - ref_out.detach()[4 * rank:4 * rank + 4]).abs().max()),
        "grad_max_err": float((model[0].weight.grad.cpu() - ref[0].weight.grad).abs().max()),
        "grad_norm": float(grad_norm.cpu()),
        "ref_norm": float(ref_norm),
        "norm_device": str(grad_norm.device),
        "running_mean_err": float((model[1].running_mean.cpu() - ref[1].running_mean).abs().max()),
        "loss": f"{loss.detach():.4f}",
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
