"""Issue 24: resuming into another optimizer or another model is one line naming the checkpoint and what
differs -- not a KeyError at the first step, nor a message that stops at a colon."""

from __future__ import annotations

import pytest
import torch

from torchport.runtime import checkpoint as ckpt
from torchport.runtime.checkpoint import CheckpointError


def _state(opt_cls=torch.optim.SGD, classes=3, *, drop_type=False, **opt_kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, classes))
    opt = opt_cls(model.parameters(), lr=0.1, **opt_kw)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    state = ckpt.capture(model=model, optimizer=opt)
    if drop_type:  # a checkpoint written before the optimizer kind was recorded
        state.pop("optimizer_type")
    return state


def _fresh(opt_cls=torch.optim.SGD, classes=3, **opt_kw):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, classes))
    return model, opt_cls(model.parameters(), lr=0.1, **opt_kw)


@pytest.mark.parametrize("drop_type", [False, True])
@pytest.mark.parametrize("saved,now", [(torch.optim.SGD, torch.optim.AdamW), (torch.optim.AdamW, torch.optim.SGD)])
def test_resume_with_another_optimizer_is_refused_naming_the_checkpoint(saved, now, drop_type):
    state = _state(saved, drop_type=drop_type, **({"momentum": 0.9} if saved is torch.optim.SGD else {}))
    model, opt = _fresh(now, **({"momentum": 0.9} if now is torch.optim.SGD else {}))
    with pytest.raises(CheckpointError, match=r"checkpoint run/ckpt-000000007\.pt.*(SGD|AdamW).*start a new run"):
        ckpt.restore(state, model=model, optimizer=opt, source="run/ckpt-000000007.pt")


def test_same_optimizer_resumes_and_steps():
    state = _state(torch.optim.AdamW)
    model, opt = _fresh(torch.optim.AdamW)
    ckpt.restore(state, model=model, optimizer=opt, source="c.pt")
    model(torch.randn(2, 4)).sum().backward()
    opt.step()   # the KeyError of a foreign state would surface here


def test_model_mismatch_names_checkpoint_keys_and_shapes():
    state = _state(classes=3)
    model, opt = _fresh(classes=5)
    with pytest.raises(CheckpointError) as err:
        ckpt.restore(state, model=model, optimizer=opt, source="run/ckpt-1.pt")
    msg = str(err.value)
    assert "checkpoint run/ckpt-1.pt" in msg and "2.weight (3, 8) in the checkpoint vs (5, 8) here" in msg
    assert "\n" not in msg and not msg.rstrip().endswith(":")
    other = torch.nn.Sequential(torch.nn.Linear(4, 8))
    with pytest.raises(CheckpointError, match=r"2 unexpected key\(s\) \(2\.weight, 2\.bias\)"):
        ckpt.restore(state, model=other, source="run/ckpt-1.pt")
