"""torch.compile on the emulated npu: Inductor (on the host view), aot_eager and the torchair stand-in give
eager's results, forward and backward, and uninstall gives torch its default backend back."""

from __future__ import annotations

import copy

import pytest
import torch

import torchport.emulate as emulate


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))


def _compare(backend) -> None:
    torch._dynamo.reset()
    eager = _model().to("npu")
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, backend=backend)
    x = torch.randn(2, 3, 6, 6).to("npu")
    y = torch.tensor([0, 2]).to("npu")
    for _ in range(2):   # the second step runs the cached compiled code
        out_c = compiled(x)
        loss_c = torch.nn.functional.cross_entropy(out_c, y)
        loss_c.backward()
        loss_e = torch.nn.functional.cross_entropy(eager(x), y)
        loss_e.backward()
    assert out_c.device.type == "npu" and loss_c.device.type == "npu"
    assert abs(loss_c.item() - loss_e.item()) < 1e-5
    for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters()):
        assert pc.grad is not None and pc.grad.device.type == "npu", name
        assert (pe.grad - pc.grad).abs().max().item() < 1e-5, name
    bn_e, bn_c = eager[1], compiled_model[1]
    assert bn_c.running_mean.device.type == "npu"
    assert (bn_e.running_mean - bn_c.running_mean).abs().max().item() < 1e-6   # buffers updated in place
    assert bn_c.num_batches_tracked.item() == 2


def test_inductor_compiles_npu_graphs_with_eager_results():
    with emulate.emulated():
        _compare("inductor")


def test_aot_eager_and_torchair_standin_match_eager():
    with emulate.emulated():
        _compare("aot_eager")
        import torch_npu  # noqa: F401
        import torchair

        config = torchair.CompilerConfig()
        config.experimental_config.frozen_parameter = True   # accepted like the card's options
        _compare(torchair.get_npu_backend(compiler_config=config))


def test_install_routes_the_default_backend_and_uninstall_puts_it_back():
    original = torch._TorchCompileInductorWrapper.__call__
    with emulate.emulated():
        assert torch._TorchCompileInductorWrapper.__call__ is not original
        assert torch._TorchCompileInductorWrapper.__call__.__wrapped__ is original
    assert torch._TorchCompileInductorWrapper.__call__ is original
    import sys

    assert "torchair" not in sys.modules


def test_cpu_graphs_compile_unchanged_while_installed():
    with emulate.emulated():
        torch._dynamo.reset()
        f = torch.compile(lambda a: (a * 2).sin())
        a = torch.randn(5)
        assert torch.allclose(f(a), (a * 2).sin())
        assert f(a).device.type == "cpu"
