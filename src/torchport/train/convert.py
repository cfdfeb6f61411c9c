"""Convert a trainer checkpoint between ``--strategy ddp`` (one ``.pt`` file) and ``--strategy fsdp`` (a sharded
DCP directory), both ways, in one process on CPU::

    python -m torchport.train.convert runs/a/checkpoints/ckpt-000000120.pt runs/b/step-000000120   # ddp -> fsdp
    python -m torchport.train.convert runs/b/checkpoints/step-000000120 ckpt-000000120.pt          # fsdp -> ddp

then ``torchport train --strategy fsdp --resume runs/b/step-000000120`` (or ``--strategy ddp --resume
ckpt-000000120.pt``), on any number of processes. The direction follows SRC. The model and optimizer are rebuilt
from the config stored in the checkpoint; weights, optimizer state, LR schedule, loss scaler, progress and RNG
carry over unchanged.

Exit codes: 0 converted; 2 bad arguments; 5 SRC unreadable, damaged, refused (it holds a pickle that could run
code: nothing of it ran; ``--trust-checkpoint`` for one you made yourself) or not a trainer checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["convert_checkpoint", "main"]


def _shapes(src: Any, trust: bool = False) -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """``(config, {model key: shape})`` of a trainer checkpoint in either layout, without building anything."""
    from torchport.runtime import checkpoint as ckpt
    from torchport.runtime import dcp
    from torchport.storage import fs

    if dcp.is_dcp_checkpoint(src):
        meta = dcp.read_metadata(src, trust=trust).state_dict_metadata
        shapes = {k[len("model."):]: tuple(m.size) for k, m in meta.items()
                  if k.startswith("model.") and hasattr(m, "size")}
        state = ckpt.load(fs.join(src, dcp._EXTRA), weights_only=not trust)
    else:
        state = ckpt.load(src, weights_only=not trust)
        shapes = {k: tuple(v.shape) for k, v in (state.get("model") or {}).items()}
    if "config" not in state or not shapes:
        raise ckpt.CheckpointError(f"{src} is not a torchport trainer checkpoint (no config or model state); "
                                   "only `torchport train` checkpoints convert")
    return state["config"], shapes


def convert_checkpoint(src: str | Path, dst: str | Path, *, trust: bool = False) -> Any:
    """Convert trainer checkpoint ``src`` (file or DCP directory) into the other layout at ``dst``; returns ``dst``.

    ``src`` is read as data (no pickle it holds runs); ``trust=True`` (``--trust-checkpoint``) lifts that for a
    checkpoint you made yourself."""
    from torchport.models import build_model
    from torchport.runtime import dcp
    from torchport.train.config import TrainConfig
    from torchport.train.optim import build_optimizer

    config, shapes = _shapes(src, trust)
    cfg = TrainConfig.from_dict(config, source=str(src))
    # The classifier's outputs: the config's, else the last 2-D weight (the head) of the saved model.
    heads = [s for k, s in shapes.items() if k.endswith("weight") and len(s) == 2]
    num_classes = cfg.num_classes or (heads[-1][0] if heads else None)
    model = build_model(cfg.model, num_classes=num_classes, image_size=cfg.image_size)
    optimizer = build_optimizer(model, name=cfg.optimizer, lr=cfg.lr, momentum=cfg.momentum,
                                weight_decay=cfg.weight_decay)
    return dcp.convert(src, dst, model=model, optimizer=optimizer, trust=trust)


if __name__ == "__main__":   # the command lives in cli/ (torchport.cli.train.convert_main)
    from torchport.cli.train import convert_main

    convert_main()
