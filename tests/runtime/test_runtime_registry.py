import dataclasses

import pytest

from torchport import backends
from torchport.backends import DuplicateBackendError, UnknownBackendError


def test_builtin_backends_in_priority_order():
    assert backends.names()[:5] == ["npu", "cuda", "xpu", "mps", "cpu"]


def test_unknown_backend_lists_known_and_suggests():
    with pytest.raises(UnknownBackendError) as err:
        backends.get("cudaa")
    msg = str(err.value)
    assert "known backends" in msg and "npu" in msg and "cpu" in msg
    assert "Did you mean 'cuda'" in msg


def test_duplicate_registration_is_an_error_with_hint():
    dup = dataclasses.replace(backends.get("cpu"))
    with pytest.raises(DuplicateBackendError, match="replace=True"):
        backends.register(dup)


def test_replace_and_restore():
    original = backends.get("mps")
    fake = dataclasses.replace(original, probe=lambda: True, emulated=True)
    previous = backends.register(fake, replace=True)
    try:
        assert previous is original
        assert backends.get("mps").label == "mps (emulated)"
    finally:
        backends.unregister("mps", restore=previous)
    assert backends.get("mps") is original


def test_lookup_accepts_index_suffix_and_case():
    assert backends.get("CPU:0").name == "cpu"


def test_entry_point_backend(monkeypatch):
    """A third-party backend registers through the ``torchport.backends`` entry-point group."""
    from importlib import metadata

    from torchport.backends import registry

    spec = dataclasses.replace(backends.get("cpu"), name="acme", priority=5, is_accelerator=True)

    class EP:
        name = "acme"

        def load(self):
            return lambda: spec

    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(metadata, "entry_points", lambda group: [EP()] if group == registry.ENTRY_POINT_GROUP else [])
    try:
        assert backends.get("acme") is spec
        assert "acme" in backends.names()
    finally:
        backends.unregister("acme")


def test_entry_point_wrong_type_is_explained(monkeypatch):
    from importlib import metadata

    from torchport.backends import registry

    class EP:
        name = "broken"

        def load(self):
            return 42

    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(metadata, "entry_points", lambda group: [EP()])
    with pytest.raises(TypeError, match="expected a torchport.backends.BackendSpec"):
        backends.get("cpu")


def test_import_torchport_has_no_side_effects():
    import subprocess
    import sys

    code = "import sys, torchport, torchport.backends; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
