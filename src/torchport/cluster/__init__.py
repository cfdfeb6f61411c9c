"""Many nodes: scheduler environments mapped onto torchrun (:mod:`.environments`), the ``torchport launch``
wrapper around torchrun (:mod:`.launch`), and a multi-node rehearsal on one machine (:mod:`.rehearsal`).

The engine is PyTorch's own (torchrun / TorchElastic with a c10d rendezvous); this package only reads where a
node stands, builds torchrun's command, and turns torchrun's failures into one line.
"""

from torchport.cluster.environments import ENVIRONMENTS, NodePlan, detect, read

__all__ = ["ENVIRONMENTS", "NodePlan", "detect", "read"]
