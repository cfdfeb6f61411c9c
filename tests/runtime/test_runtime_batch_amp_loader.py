import collections
import dataclasses
import warnings

import pytest
import torch

import torchport
from torchport import backends
from torchport.backends.spec import AmpPolicy
from torchport.runtime.device import ConfigError, Target


def cpu():
    return torchport.select_device("cpu")


# ---------------------------------------------------------------- batch moves
Pair = collections.namedtuple("Pair", "x y")


@dataclasses.dataclass
class Batch:
    images: torch.Tensor
    meta: dict


def test_to_device_walks_nested_structures():
    cpu()
    t = torch.ones(2)
    batch = {"a": [t, (t, Pair(t, 3))], "b": Batch(t, {"k": t}), "s": "text"}
    out = torchport.to_device(batch, "meta")
    assert out["a"][0].device.type == "meta"
    assert isinstance(out["a"][1][1], Pair) and out["a"][1][1].x.device.type == "meta" and out["a"][1][1].y == 3
    assert isinstance(out["b"], Batch) and out["b"].images.device.type == "meta"
    assert out["b"].meta["k"].device.type == "meta"
    assert out["s"] == "text"


def test_to_device_non_blocking_only_from_pinned(monkeypatch):
    cpu()
    seen = []
    real_to = torch.Tensor.to

    def spy(self, *a, **kw):
        seen.append(kw.get("non_blocking"))
        return real_to(self, *a, **kw)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    torchport.to_device(torch.ones(1))
    assert seen == [False]
    torchport.to_device(torch.ones(1), non_blocking=True)
    assert seen[-1] is True


# ---------------------------------------------------------------- AMP policy
def _target(name, **amp_overrides):
    spec = backends.get(name)
    spec = dataclasses.replace(spec, probe=lambda: True, device_count=lambda: 1,
                               amp=dataclasses.replace(spec.amp, **amp_overrides))
    return Target(backend=spec, index=0)


@pytest.mark.parametrize(
    "name, bf16_fast, expect",
    [("cuda", True, "bf16"), ("cuda", False, "fp16"), ("npu", True, "bf16"), ("npu", False, "fp16"),
     ("xpu", True, "bf16"), ("mps", True, "fp16"), ("cpu", True, "bf16"), ("cpu", False, "fp32")],
)
def test_auto_precision_per_backend(name, bf16_fast, expect):
    assert _target(name, bf16_probe=lambda: bf16_fast).backend.amp.resolve_auto() == expect


@pytest.mark.parametrize("name", ["cuda", "npu"])
def test_fp16_needs_scaler_on_gpu_and_npu(name):
    policy = backends.get(name).amp
    assert policy.fp16_needs_scaler and "fp16" in policy.low_precision


def test_fp32_is_noop_and_has_no_scaler():
    amp = torchport.Amp("fp32", cpu())
    assert amp.scaler is None and amp.dtype is None
    with amp.autocast():
        assert not torch.is_autocast_enabled("cpu")


def test_bf16_on_cpu_autocasts_without_scaler():
    amp = torchport.Amp("bf16", cpu())
    assert amp.scaler is None
    lin = torch.nn.Linear(4, 4)
    with amp.autocast():
        assert lin(torch.randn(2, 4)).dtype == torch.bfloat16


def test_fp16_on_cpu_runs_as_asked_with_a_scaler_and_its_cost(monkeypatch):
    from torchport.runtime import amp as amp_mod

    monkeypatch.setattr(amp_mod, "_warned", set())
    with pytest.warns(amp_mod.SlowPrecisionWarning, match=r"precision 'fp16' runs as asked on cpu.*measured"):
        amp = torchport.Amp("fp16", cpu())
    assert amp.precision == "fp16" and amp.scaler is not None   # fp16's range needs loss scaling on any processor
    with amp.autocast():
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.float16


def test_bad_precision_is_a_config_error():
    with pytest.raises(ConfigError, match="precision='fp8'"):
        torchport.Amp("fp8", cpu())


def _scaled_setup(**kw):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    amp = torchport.Amp("bf16", cpu(), scaler=True, **kw)
    return model, opt, amp


def test_overflow_skips_step_and_records_event(caplog):
    model, opt, amp = _scaled_setup(init_scale=1024.0, log_overflow=True)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.randn(3, 4)).sum()
    amp.backward(loss)
    model.weight.grad[0, 0] = float("inf")  # forced overflow
    with caplog.at_level("WARNING", logger="torchport.amp"):
        stepped = amp.step(opt)
    assert stepped is False
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert amp.skipped_steps == 1
    ev = amp.events[-1]
    assert (ev.reason, ev.old_scale, ev.new_scale, ev.skipped) == ("overflow", 1024.0, 512.0, True)
    assert "Gradient overflow. Skipping step; loss scale reduced to 512.0" in caplog.text


def test_scale_grows_after_growth_interval():
    model, opt, amp = _scaled_setup(init_scale=8.0, growth_interval=3)
    for _ in range(3):
        amp.backward(model(torch.randn(3, 4)).sum())
        assert amp.step(opt)
        opt.zero_grad()
    assert amp.scaler.get_scale() == 16.0
    assert [e.reason for e in amp.events] == ["growth"]


def test_static_scale_never_changes_but_still_skips():
    model, opt, amp = _scaled_setup(static_scale=128.0)
    amp.backward(model(torch.randn(3, 4)).sum())
    model.bias.grad.fill_(float("nan"))
    assert amp.step(opt) is False
    assert amp.scaler.get_scale() == 128.0
    assert amp.state_dict()["dynamic"] is False


def test_scaler_state_roundtrip_normalised():
    _, _, amp = _scaled_setup(init_scale=256.0)
    state = amp.state_dict()
    assert state["dynamic"] is True and state["scale"] == 256.0
    _, _, other = _scaled_setup(init_scale=2.0)
    other.load_state_dict(state)  # a torch_npu-style state with 'dynamic' loads into a torch scaler
    assert other.scaler.get_scale() == 256.0


def test_clip_grad_norm_applied_after_unscale():
    model, opt, amp = _scaled_setup(init_scale=1024.0)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    amp.backward((model(torch.randn(8, 4)) * 100).sum())
    assert amp.step(opt, clip_grad_norm=1e-3)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    # clipping the *unscaled* gradient to norm 1e-3 bounds the SGD update by lr * 1e-3
    assert 0 < (after - before).norm() <= 0.1 * 1e-3 * 1.0001


# ---------------------------------------------------------------- loader policy
def test_loader_kwargs_cpu_policy():
    kw = torchport.loader_kwargs(cpu(), num_workers=2, seed=5)
    assert kw["pin_memory"] is False
    assert kw["num_workers"] == 2 and kw["persistent_workers"] and kw["prefetch_factor"] == 2
    assert torch.randint(0, 10**9, (1,), generator=kw["generator"]).item() == \
        torch.randint(0, 10**9, (1,), generator=torchport.loader_kwargs(cpu(), seed=5)["generator"]).item()


def test_loader_kwargs_pins_only_where_it_helps():
    assert torchport.loader_kwargs(_target("npu"), num_workers=0)["pin_memory"] is True
    assert torchport.loader_kwargs(_target("mps"), num_workers=0)["pin_memory"] is False
    kw = torchport.loader_kwargs(cpu(), num_workers=0)
    assert "prefetch_factor" not in kw and "persistent_workers" not in kw


def test_loader_num_workers_from_cpu_budget(monkeypatch):
    from torchport.runtime import loader

    monkeypatch.setattr(loader, "cpu_budget", lambda: 8)
    assert torchport.loader_kwargs(cpu())["num_workers"] == 7
    monkeypatch.setattr(loader, "cpu_budget", lambda: 1)
    assert torchport.loader_kwargs(cpu())["num_workers"] == 0


def test_cpu_budget_divides_by_local_world(monkeypatch):
    from torchport.runtime import loader

    monkeypatch.setattr(loader.os, "sched_getaffinity", lambda _: set(range(8)))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert loader.cpu_budget() == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "x")
    with pytest.raises(ConfigError, match="LOCAL_WORLD_SIZE"):
        loader.cpu_budget()


def test_worker_seeds_mix_worker_and_rank():
    from torchport.runtime.seed import worker_seed

    seeds = {worker_seed(0, w, r) for w in range(4) for r in range(4)}
    assert len(seeds) == 16
    assert worker_seed(0, 1, 2) == worker_seed(0, 1, 2)


class _RandomDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        import random

        import numpy as np

        return torch.tensor([random.random(), float(np.random.rand()), torch.rand(()).item()])


def test_dataloader_workers_are_reproducible():
    kw = torchport.loader_kwargs(cpu(), num_workers=2, seed=11, persistent_workers=False)
    a = torch.cat(list(torch.utils.data.DataLoader(_RandomDataset(), batch_size=2, **kw)))
    kw = torchport.loader_kwargs(cpu(), num_workers=2, seed=11, persistent_workers=False)
    b = torch.cat(list(torch.utils.data.DataLoader(_RandomDataset(), batch_size=2, **kw)))
    kw = torchport.loader_kwargs(cpu(), num_workers=2, seed=11, rank=1, persistent_workers=False)
    c = torch.cat(list(torch.utils.data.DataLoader(_RandomDataset(), batch_size=2, **kw)))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)  # another rank draws another stream


# ---------------------------------------------------------------- seeding
def test_seed_everything_reproducible_and_rng_state_roundtrip():
    import random

    import numpy as np

    from torchport.runtime.seed import rng_state, set_rng_state

    torchport.seed_everything(123)
    first = (random.random(), np.random.rand(), torch.rand(2))
    torchport.seed_everything(123)
    again = (random.random(), np.random.rand(), torch.rand(2))
    assert first[0] == again[0] and first[1] == again[1] and torch.equal(first[2], again[2])
    state = rng_state()
    x = (random.random(), np.random.rand(), torch.rand(2))
    set_rng_state(state)
    y = (random.random(), np.random.rand(), torch.rand(2))
    assert x[0] == y[0] and x[1] == y[1] and torch.equal(x[2], y[2])
    # the state survives a weights_only round trip (checkpoints)
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    set_rng_state(torch.load(buf, weights_only=True))
    assert random.random() == y[0]


def test_memory_stats_on_cpu_are_honestly_unknown():
    assert torchport.memory_stats(cpu()) == {"allocated_bytes": None, "peak_bytes": None, "reserved_bytes": None}
    torchport.synchronize(cpu())
    torchport.reset_peak_memory(cpu())


def test_host_tracked_scale_matches_the_scaler():
    """Events are computed on the host (no device sync); they must agree with GradScaler itself."""
    model, opt, amp = _scaled_setup(init_scale=64.0, growth_interval=2)
    pattern = [False, False, True, False, False, False, True, True, False, False]
    for overflow in pattern:
        amp.backward(model(torch.randn(3, 4)).sum())
        if overflow:
            model.weight.grad[0, 0] = float("inf")
        assert amp.step(opt) is (not overflow)
        opt.zero_grad()
        assert amp.loss_scale == amp.scaler.get_scale()
    assert [e.reason for e in amp.events].count("overflow") == 3
    state = amp.state_dict()
    _, _, other = _scaled_setup(init_scale=1.0, growth_interval=2)
    other.load_state_dict(state)
    assert other.loss_scale == amp.loss_scale


def test_autocast_forward_casts_inside_and_returns_float32(monkeypatch):
    """apex O1 as torch autocast (what `torchport fix` writes for `amp.initialize`): the layers run in fp16,
    the model's output is float32, the module is the same object (same state_dict keys), it pickles and
    deep-copies, and an exception in forward leaves no autocast open. (A CPU running fp16 natively: the
    policy lets fp16 through; test_autocast_follows_the_cpu_policy covers the other CPUs.)"""
    import copy
    import io

    monkeypatch.setenv("TORCHPORT_CPU_FP16", "native")

    from torchport.runtime.amp import autocast_forward

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    keys = list(model.state_dict())
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    assert autocast_forward(model, device_type="cpu") is model
    x = torch.randn(5, 4)
    out = model(x)
    assert seen == [torch.float16] and out.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.float16):
        expected = model[2](model[1](model[0](x))).float()
    assert torch.equal(out, expected)
    assert list(model.state_dict()) == keys
    model[0]._forward_hooks.clear()
    assert copy.deepcopy(model)(x).dtype == torch.float32
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf, weights_only=False)(x), out)
    with pytest.raises(RuntimeError):
        model(torch.randn(5, 7))
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_follows_the_cpu_policy(monkeypatch):
    """torchport.autocast / autocast_forward on a CPU without native fp16/bf16: the region runs in float32
    (autocast off: ~10x faster than emulated low precision), as `torchport run` does for the same line; with
    native bf16, an asked fp16 becomes bf16 (the backend's fallback)."""
    import torchport
    from torchport.runtime.amp import autocast_forward

    monkeypatch.setenv("TORCHPORT_CPU_FP16", "none")
    monkeypatch.setenv("TORCHPORT_CPU_BF16", "none")
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with torchport.autocast(device_type="cpu"):
        assert lin(x).dtype == torch.float32 and not torch.is_autocast_enabled("cpu")

    class Square(torch.autograd.Function):   # a fixed file's custom_fwd: cast_inputs still casts in that region
        @staticmethod
        @torchport.compat.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, a):
            return a @ a

        @staticmethod
        @torchport.compat.amp.custom_bwd
        def backward(ctx, g):
            return g

    half = torch.ones(2, 2, dtype=torch.half)
    with torchport.autocast(device_type="cpu"):
        assert Square.apply(half).dtype == torch.float32   # as under `torchport run` (and inside CUDA autocast)
    assert Square.apply(half).dtype == torch.float16       # outside any autocast: left alone
    model = autocast_forward(torch.nn.Sequential(torch.nn.Linear(4, 3)), device_type="cpu")
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    model(x)
    assert seen == [torch.float32]
    monkeypatch.setenv("TORCHPORT_CPU_BF16", "native")
    with torchport.autocast(torch.float16, device_type="cpu"):
        assert lin(x).dtype == torch.bfloat16
    with torchport.autocast(torch.float16, enabled=False, device_type="cpu"):
        assert lin(x).dtype == torch.float32
