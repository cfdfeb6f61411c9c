"""Moved: the shared benchmark workload is :mod:`torchport.workload` (used by bench and profile alike)."""

from torchport.workload import *  # noqa: F401,F403
from torchport.workload import __all__  # noqa: F401
