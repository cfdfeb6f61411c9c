"""The reference image-classification trainer (``torchport train``), written on the runtime API.

Read in this order: :mod:`~torchport.train.config` (every knob), :mod:`~torchport.train.loop`
(the loop, top to bottom), then :mod:`~torchport.train.inputs` / :mod:`~torchport.train.data`
(ImageFolder input), :mod:`~torchport.models`, :mod:`~torchport.train.optim`,
:mod:`~torchport.train.metrics`. Checkpoints use :mod:`torchport.runtime.checkpoint`.

Example::

    from torchport.train import TrainConfig, train
    result = train(TrainConfig(epochs=1))          # embedded dataset, best device present
    print(f"val top-1 {result.val_top1:.1%}")
"""

from __future__ import annotations

from torchport._lazy import lazy_exports

_EXPORTS = {
    "TrainConfig": "torchport.train.config",
    "train": "torchport.train.loop",
    "TrainResult": "torchport.train.loop",
    "NonFiniteLossError": "torchport.train.errors",
    "build_model": "torchport.models",
    "model_names": "torchport.models",
    "DataError": "torchport.train.data",
    "BadImageError": "torchport.train.data",
    "read_jsonl": "torchport.train.metrics",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
