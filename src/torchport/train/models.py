"""The trainer's models: re-exported from :mod:`torchport.models` (the one module of small models)."""

from torchport.models import LOCAL_MODELS, build_model, check_model_name, model_names

__all__ = ["build_model", "check_model_name", "model_names", "LOCAL_MODELS"]
