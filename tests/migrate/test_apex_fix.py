"""TP210: apex AMP (NVIDIA's and Ascend's fork) fixed to torch.amp, or reported with the hand fix.

The behaviour test trains the same tiny apex script twice on the CPU -- the original against the
emulator's apex stand-in (what `torchport run` serves on the emulated npu) and the fixed copy against
torch.amp -- and compares every loss and the final weights.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

from migrate_helpers import exec_on_cpu
from torchport.migrate import fix_source, scan_source
from torchport.emulate._standin import APEX_DIR
from torchport.shim import redirect_cuda

LOOP = """\
import torch
from apex import amp

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
model, optimizer = amp.initialize(model, optimizer, {options})
criterion = torch.nn.CrossEntropyLoss()
losses = []
for step in range(6):
    x = torch.randn(32, 8)
    y = torch.randint(0, 3, (32,))
    loss = criterion(model(x), y)
    losses.append(loss.item())
    optimizer.zero_grad()
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
    optimizer.step()
state = amp.state_dict()
"""


def _fix(src: str, unsafe: bool = False) -> str:
    return fix_source(textwrap.dedent(src), unsafe=unsafe)


def _tp210(src: str) -> list[str]:
    return [f.message for f in scan_source(textwrap.dedent(src)).findings if f.code == "TP210"]


def _run(code: str, apex_standin: bool) -> dict:
    saved = {k: sys.modules.get(k) for k in ("apex", "apex.amp")}
    if apex_standin:  # what the emulator's import hook serves for `from apex import amp` (its amp.py alone: the
        # package's other stand-ins, apex.optimizers, need the emulated torch_npu)
        spec = importlib.util.spec_from_file_location("apex.amp", APEX_DIR / "amp.py")
        stand_in = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stand_in)
        sys.modules["apex"] = types.SimpleNamespace(amp=stand_in)
        sys.modules["apex.amp"] = stand_in
    try:
        return exec_on_cpu(code, {"__name__": "script"})
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@pytest.mark.parametrize("options", ['opt_level="O1"', 'opt_level="O1", loss_scale=128.0, combine_grad=True',
                                     'opt_level="O0"'])
def test_fixed_apex_script_trains_like_the_original_under_the_apex_standin(options):
    original = LOOP.format(options=options)
    fixed = _fix(original)
    assert "apex" not in fixed and "amp." not in fixed.replace("torch.amp.", ""), fixed
    assert _fix(fixed) == fixed  # fixing twice changes nothing
    before, after = _run(original, apex_standin=True), _run(fixed, apex_standin=False)
    assert before["losses"] == after["losses"]  # bitwise: the same ops in the same dtypes
    for a, b in zip(before["model"].parameters(), after["model"].parameters()):
        assert torch.equal(a, b)
    if "O0" in options:
        assert "autocast_forward" not in fixed and "enabled=False" in fixed
    else:
        assert "model = torchport.autocast_forward(model)" in fixed
        assert after["scaler"].get_scale() == (128.0 if "128" in options else 65536.0)


def test_scale_loss_with_a_longer_body_keeps_the_body():
    out = _fix("""\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer)
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward(retain_graph=True)
        print(scaled_loss.item())
    optimizer.step()
    """)
    assert "scaled_loss = scaler.scale(loss)\nscaled_loss.backward(retain_graph=True)\nprint(scaled_loss.item())\n" \
           "scaler.step(optimizer)\nscaler.update()\n" in out, out


def test_o2_and_load_state_dict_are_unsafe_fixes():
    src = """\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    optimizer.step()
    """
    assert "apex" in _fix(src)
    assert "torchport.autocast_forward(model)" in _fix(src, unsafe=True)
    assert any("O2 (as O1" in m for m in _tp210(src))
    load = src.replace('opt_level="O2"', 'opt_level="O1"') + "amp.load_state_dict(ckpt['amp'])\n"
    assert "apex" in _fix(load)
    assert "scaler.load_state_dict(ckpt['amp'])" in _fix(load, unsafe=True)


def test_apex_across_functions_shares_one_global_scaler():
    """The ImageNet/ModelZoo layout: amp.initialize in main_worker, scale_loss in train(); apex's state is
    global, so the scaler becomes a module global (`global scaler` where it is created)."""
    src = """\
    from apex import amp

    def main_worker(model, optimizer):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        train(model, optimizer)

    def train(model, optimizer):
        loss = model(1)
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    """
    out = _fix(src)
    assert ("    global scaler\n    model = torchport.autocast_forward(model)\n"
            "    scaler = torch.amp.GradScaler(torchport.current().type)\n") in out, out
    assert "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n" in out, out
    compile(out, "fixed.py", "exec")
    # one apex call that cannot move keeps the whole file's apex code, each use reported with the line
    bad = src.replace("model(1)\n", "model(1)\n        amp.scale_loss(loss, optimizer, delay_unscale=True)\n")
    assert _fix(bad) == textwrap.dedent(bad)
    assert any("not fixed because of the finding at line 9" in m for m in _tp210(bad)), _tp210(bad)


def test_module_level_initialize_reaches_a_train_function():
    out = _fix("""\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")

    def train(loss):
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    """)
    assert "scaler = torch.amp.GradScaler(torchport.current().type)" in out
    assert "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n" in out, out


@pytest.mark.parametrize("change, words", [
    ('opt_level="O3"', "pure fp16"),
    ('opt_level="O4"', "is not \"O0\"-\"O3\""),
    ('opt_level="O1", loss_scale=scale_for(model)', "`loss_scale` is not a literal number"),
    ('opt_level="O1", cast_model_type=torch.float16', "cast_model_type"),
])
def test_unfixable_initialize_options_are_reported(change, words):
    src = f"""\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, {change})
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    optimizer.step()
    """
    assert _fix(src, unsafe=True) == textwrap.dedent(src)
    assert any(words in m for m in _tp210(src)), _tp210(src)


def test_scale_loss_without_a_step_beside_it_is_reported():
    src = """\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer)
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    step(optimizer)
    """
    assert _fix(src) == textwrap.dedent(src)
    assert any("no `optimizer.step()` statement" in m for m in _tp210(src))


MODELZOO = Path(__file__).parent / "equivalence" / "modelzoo_apex.py"  # the own-corpus script


@pytest.mark.parametrize("amp_on", [True, False])
def test_modelzoo_layout_with_a_conditional_initialize_trains_like_the_original(amp_on):
    """`if args.amp: amp.initialize(...)` in main_worker, `scale_loss` in train(): a disabled scaler goes
    before the `if`, so the steps of the non-AMP path stay plain steps."""
    original = MODELZOO.read_text(encoding="utf-8")
    fixed = _fix(original)
    assert "    global scaler\n    scaler = torch.amp.GradScaler(torchport.current().type, enabled=False)\n" \
           "    if args.amp:\n" in fixed, fixed
    assert _fix(fixed) == fixed
    args = argparse.Namespace(amp=amp_on, epochs=1, batch_size=8)
    runs = []
    for code, standin in ((original, True), (fixed, False)):
        # the original as `torchport run --device cpu` runs it (its `.cuda()` calls redirected), on the stand-in
        with redirect_cuda("cpu") if standin else contextlib.nullcontext():
            namespace = _run(code, apex_standin=standin)  # defines main_worker (not __main__: nothing runs)
            torch.manual_seed(0)
            namespace["args"] = args
            runs.append(exec_on_cpu("model, losses = main_worker(args)", namespace))
    (before, after) = runs
    assert len(before["losses"]) == 4 and before["losses"] == after["losses"]
    for a, b in zip(before["model"].parameters(), after["model"].parameters()):
        assert torch.equal(a, b)
    assert after["scaler"].is_enabled() is amp_on


def test_a_plain_backward_beside_a_routed_step_makes_the_fix_unsafe():
    """scaler.step() unscales: a warm-up phase that back-propagates without scale_loss in the same function
    would have its gradients divided by the scale. Only the `else:` of the `--amp` switch is sound."""
    src = """\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer)
    def train(loss, warmup):
        if warmup:
            loss.backward()
            optimizer.step()
            return
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    """
    assert "apex" in _fix(src)
    assert "scaler.step(optimizer)" in _fix(src, unsafe=True)
    assert any("unsafe: `loss.backward()` (line 5)" in m for m in _tp210(src)), _tp210(src)
    assert {f.fix_safety for f in scan_source(textwrap.dedent(src)).findings} == {"unsafe"}


def test_run_time_opt_level_and_a_function_level_apex_import_huggingface_style(monkeypatch):
    """transformers-era examples: `try: from apex import amp / except ImportError: raise ImportError(...)` inside
    the function and `opt_level=args.fp16_opt_level`: the try goes, the level is tested when the script runs
    (an unsafe fix: "O2"/"O3" become O1). fp16 as on a GPU: a CPU that runs it natively (the policy's say)."""
    monkeypatch.setenv("TORCHPORT_CPU_FP16", "native")
    src = """\
    import torch

    def train(args, model, optimizer, batches):
        if args.fp16:
            try:
                from apex import amp
            except ImportError:
                raise ImportError("Please install apex from https://www.github.com/nvidia/apex to use fp16 training.")
            model, optimizer = amp.initialize(model, optimizer, opt_level=args.fp16_opt_level)
        for batch in batches:
            loss = model(batch).sum()
            if args.fp16:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
            optimizer.step()
        return model
    """
    assert "apex" in _fix(src)  # unsafe: only with --unsafe-fixes
    out = _fix(src, unsafe=True)
    assert "try:" not in out and "apex" not in out, out
    assert ('        if args.fp16_opt_level != "O0":\n            model = torchport.autocast_forward(model)\n'
            '        scaler = torch.amp.GradScaler(torchport.current().type, enabled=args.fp16_opt_level != "O0")\n'
            ) in out, out
    assert _fix(out, unsafe=True) == out
    import argparse

    for level, dtype in (("O1", torch.float16), ("O0", torch.float32)):
        model = torch.nn.Linear(4, 2)
        seen = []
        model.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
        ns = exec_on_cpu(out)
        trained = exec_on_cpu("m = train(args, model, torch.optim.SGD(model.parameters(), lr=0.1), [x])",
                              {**ns, "args": argparse.Namespace(fp16=True, fp16_opt_level=level), "model": model,
                               "x": torch.randn(3, 4), "torch": torch})
        assert seen == [dtype] and trained["m"] is model, (level, seen)


def test_several_models_and_losses_share_one_scaler_as_on_the_standin():
    """apex's DCGAN example: `[netD, netG], [optD, optG] = amp.initialize([netD, netG], [optD, optG], num_losses=3)`;
    every model's forward gets autocast; one scaler for all losses is what the stand-in does, but apex keeps
    one per loss_id: an unsafe fix."""
    src = """\
    from apex import amp
    [netD, netG], [optD, optG] = amp.initialize([netD, netG], [optD, optG], opt_level="O1", num_losses=2)
    with amp.scale_loss(errD, optD, loss_id=0) as errD_scaled:
        errD_scaled.backward()
    optD.step()
    with amp.scale_loss(errG, optG, loss_id=1) as errG_scaled:
        errG_scaled.backward()
    optG.step()
    """
    assert "apex" in _fix(src)
    out = _fix(src, unsafe=True)
    assert "netD = torchport.autocast_forward(netD)\nnetG = torchport.autocast_forward(netG)\n" in out, out
    assert "scaler.scale(errG).backward()\nscaler.step(optG)\nscaler.update()\n" in out, out
    assert any("one per `loss_id`" in m for m in _tp210(src))


def test_a_loss_scale_from_the_command_line_is_an_unsafe_static_scale():
    """Ascend ModelZoo: `loss_scale=args.loss_scale` (a number there; apex would also take "dynamic")."""
    src = """\
    from apex import amp

    def main_worker(args, model, optimizer):
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=args.loss_scale)
        train(model, optimizer, args)

    def train(model, optimizer, args):
        with amp.scale_loss(model(1), optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()

    def evaluate(model, optimizer):
        with amp.scale_loss(model(1), optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    """
    # `args` is not visible in evaluate(): the whole file is reported, each apex call once + the step
    messages = _tp210(src)
    assert any("not visible in the function of `optimizer.step()` (line 15)" in m for m in messages), messages
    assert len(messages) == 4 and _fix(src, unsafe=True) == textwrap.dedent(src)
    src = src[:src.index("    def evaluate")]
    assert "apex" in _fix(src)
    out = _fix(src, unsafe=True)
    assert "scaler = torch.amp.GradScaler(torchport.current().type, init_scale=args.loss_scale)" in out, out
    assert "    scaler.step(optimizer)\n    scaler.update(args.loss_scale)\n" in out, out
    assert any("taken for a number" in m for m in _tp210(src))
