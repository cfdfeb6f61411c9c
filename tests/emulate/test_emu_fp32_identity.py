"""fp32 on the emulated npu is CPU fp32, bit for bit: one trainer step compared op by op (issue 39).

The emulated npu runs the CPU's own kernels on host memory, so every op that receives the same bytes must
return the same bytes; where a step differs, :mod:`torchport.checks.opdiff` names the first op and says
whether its kernel differed (same inputs) or its inputs already did (a device-side op the CPU path does not
run). The drift that failed CI on an AVX2 machine came from the second kind: the loader normalised batches
on the device with ``torch.addcmul``, whose vectorised CPU kernels fuse multiply and add (one rounding),
while the CPU path rounds twice -- 1 ulp on half the pixels, 3e-4 relative loss difference 10 steps later.
"""

from __future__ import annotations

import pytest
import torch

from torchport.checks.opdiff import first_difference, record_ops


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from torchport.data.synth import make_dataset

    root = tmp_path_factory.mktemp("fp32id") / "shapes"
    make_dataset(root, classes=4, train_per_class=4, val_per_class=2, size=32)
    return root


def _trainer_step(folder, *, loader="auto", channels_last=False):
    """One step of the reference trainer's recipe: its loader, tinycnn, AdamW, label smoothing."""
    from torchport.runtime.amp import Amp
    from torchport.runtime.device import select_device
    from torchport.runtime.step import train_step
    from torchport.models import build_model
    from torchport.train import TrainConfig
    from torchport.train.inputs import build_inputs

    def step(device):
        torch.manual_seed(0)                         # the loader's base seed and the model's initial weights
        target = select_device(device.type, index=0 if device.type != "cpu" else None, warn=False)
        cfg = TrainConfig(data=str(folder), model="tinycnn", image_size=32, batch_size=8, workers=0, epochs=1,
                          precision="fp32", progress="none", device=device.type, loader=loader,
                          channels_last=channels_last)
        inputs = build_inputs(cfg, target, rank=0, world_size=1)
        images, labels = next(iter(inputs.train_loader))[:2]
        model = build_model("tinycnn", num_classes=4, image_size=32).to(device)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            assert images.is_contiguous(memory_format=torch.channels_last)
        opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.05)
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        loss, _ = train_step(model, (images, labels), opt, Amp("fp32", target), loss_fn)
        return images, loss, [p.detach() for p in model.parameters()], [b for b in model.buffers()]

    return step


@pytest.mark.parametrize("loader, channels_last", [("auto", False), ("auto", True), ("simple", True)])
def test_a_trainer_step_on_the_emulated_npu_is_cpu_fp32_bit_for_bit(emulated_npu, folder, loader, channels_last):
    """Both of the trainer's loaders; channels_last made with ``.to(memory_format=)``, which the card takes (its
    ``contiguous()`` refuses every format but the default: ``--channels-last`` used to die on the npu)."""
    step = _trainer_step(folder, loader=loader, channels_last=channels_last)
    cpu, npu = record_ops(step, "cpu"), record_ops(step, "npu")
    assert len(cpu.ops) > 100 and len(npu.ops) > 100      # forward, backward and the optimizer were recorded
    diff = first_difference(cpu, npu)
    assert diff is None, diff.describe()


def test_the_loader_defect_behind_issue_39_is_named_at_its_source(emulated_npu, folder, monkeypatch):
    """Seeded: the loader's old device-side normalisation (fused addcmul) comes back."""
    from torchport.data.loader import Loader

    monkeypatch.setattr(Loader, "_normalize_device",
                        lambda self, y: torch.addcmul(self._bias, y, self._scale).to(self.dtype))
    step = _trainer_step(folder)
    diff = first_difference(record_ops(step, "cpu"), record_ops(step, "npu"))
    assert diff is not None and diff.kind == "input" and diff.op == "aten.convolution.default"
    assert "aten.addcmul.default" in diff.only_b and not diff.only_a
    # the CPU batch is normalised by numpy (no torch op), the npu's by the fused op -- and by how much they differ
    assert ("input 0 (8, 3, 32, 32) torch.float32 differs (on the first device made outside torch's ops, "
            "on the second made by aten.addcmul.default: (8, 3, 32, 32) torch.float32: ") in diff.describe()
    assert "max abs 2.38e-07" in diff.detail                       # 1 ulp of the pixel values' magnitude


@pytest.mark.emulated_npu(perturb={"aten.convolution_backward": 1e-6})
def test_a_kernel_that_differs_on_the_npu_is_named_with_its_inputs_equal(emulated_npu, folder):
    """Seeded: one backward kernel of the npu returns slightly different numbers (the emulator's perturbation)."""
    step = _trainer_step(folder)
    diff = first_difference(record_ops(step, "cpu"), record_ops(step, "npu"))
    assert diff is not None and diff.kind == "kernel", diff and diff.describe()
    assert diff.op == "aten.convolution_backward.default"
    assert "same inputs, different outputs" in diff.describe()


def test_returned_values_are_compared_when_every_op_agrees():
    import numpy as np

    calls = []

    def step(device):  # computed outside torch's ops: nothing recorded, only the returned tensor differs
        calls.append(device)
        return torch.from_numpy(np.arange(4.0, dtype=np.float32) + len(calls))

    diff = first_difference(record_ops(step, "cpu"), record_ops(step, "cpu"))
    assert diff is not None and diff.kind == "returned" and "4 of 4 elements differ" in diff.detail


_PIN_SCRIPT = r'''
import torch, torch_npu
from torch.utils.data._utils import pin_memory as pm
from torchport.models import tinycnn

pin_threads = []
real_pin = pm.pin_memory
pm.pin_memory = lambda *a, **k: pin_threads.append(torch.get_num_threads()) or real_pin(*a, **k)
g = torch.Generator().manual_seed(1)
data = torch.utils.data.TensorDataset(torch.randn(48, 3, 32, 32, generator=g), torch.randint(0, 4, (48,), generator=g))

def run(device, pin):
    torch.manual_seed(0)
    model = tinycnn(4).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=0.02)
    losses, backward_threads = [], []
    for x, y in torch.utils.data.DataLoader(data, batch_size=16, num_workers=2, pin_memory=pin):
        x = x.to(device).requires_grad_()
        x.register_hook(lambda grad: backward_threads.append(torch.get_num_threads()))
        loss = torch.nn.functional.cross_entropy(model(x), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, backward_threads

npu, npu_threads = run("npu", True)       # first: nothing has set this process's thread counts yet
cpu, cpu_threads = run("cpu", False)
print(npu == cpu, set(npu_threads), set(cpu_threads), set(pin_threads), torch.get_num_threads())
import torchport.emulate as emulate
emulate.uninstall()
print(torch.set_num_threads is torch._C.set_num_threads, pm._pin_memory_loop.__code__.co_filename == pm.__file__)
'''


def test_a_pinned_dataloader_leaves_the_npu_backward_on_the_process_thread_count():
    """torch's pin thread calls ``torch.set_num_threads(1)``, which ATen also stores process-wide: the npu's
    backward threads (and the main thread) then ran single-threaded -- slower, and summed unlike the CPU."""
    from emu_helpers import run_python

    out = run_python(_PIN_SCRIPT, env={"TORCHPORT_EMULATE": "npu", "OMP_NUM_THREADS": "2"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "True {2} {2} {1} 2"     # the same losses; npu backward at 2 threads; the pin thread alone at 1
    assert lines[-1] == "True True"              # uninstall puts torch's own functions back
