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


def test_bf16_supported_is_the_device_modules_own_answer_not_the_fast_path():
    """`torch.cuda.is_bf16_supported()` in migrated code: `fix` writes `backend.bf16_supported()` and `run` answers
    it too, so both follow torch's answer (bf16 *possible*, emulation included on pre-Ampere CUDA) -- not
    `amp.usable("bf16")` (bf16 *fast*), which said False where torch says True."""
    import types

    cuda = backends.get("cuda")
    pre_ampere = types.SimpleNamespace(is_bf16_supported=lambda: True, get_device_capability=lambda: (7, 0))
    fake = dataclasses.replace(cuda, probe=lambda: True, module=lambda: pre_ampere, device_count=lambda: 1,
                               amp=dataclasses.replace(cuda.amp, bf16_probe=lambda: False))
    assert fake.bf16_supported() is True and fake.amp.usable("bf16") is False
    assert dataclasses.replace(fake, module=lambda: types.SimpleNamespace(is_bf16_supported=lambda: False)
                               ).bf16_supported() is False
    assert dataclasses.replace(fake, probe=lambda: False).bf16_supported() is False     # no device: torch says False
    assert backends.get("cpu").bf16_supported() is False                                # as `run` answers on a host


def test_fix_and_run_answer_is_bf16_supported_alike(tmp_path):
    import subprocess
    import sys

    from torchport.migrate import fix_source

    src = "import torch\nprint('bf16', torch.cuda.is_bf16_supported())\n"
    fixed = fix_source(src)                      # safe fixes only: the rewrite must be among them
    assert "bf16_supported()" in fixed and "torch.cuda" not in fixed
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "fixed.py").write_text(fixed)
    env = {**__import__("os").environ, "TORCHPORT_DEVICE": "cpu"}
    env.pop("TORCHPORT_EMULATE", None)
    outs = [subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path).stdout.strip().splitlines()[-1]
            for cmd in ([sys.executable, "-m", "torchport", "run", "--device", "cpu", "orig.py"],
                        [sys.executable, "fixed.py"])]
    assert outs == ["bf16 False", "bf16 False"], outs
