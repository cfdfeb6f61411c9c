"""pytest plugin (entry point ``pytest11``: ``torchport``): device-portable tests with the emulated NPU.

Fixtures:

* ``portable_device`` -- parametrized over ``"cpu"``, ``"npu"`` (emulated) and ``"cuda"``
  (only where a GPU is available). Yields the selected
  :class:`torchport.runtime.device.Target`; for ``npu`` the emulator is installed for the
  test and uninstalled afterwards (unless ``TORCHPORT_EMULATE`` already installed it).
* ``emulated_npu`` -- the emulator installed for one test; yields the ``torch.npu`` module.
  ``@pytest.mark.emulated_npu(devices=2, fallback_ops=[...], overflow_mode=..., perturb=...)``
  configures it.

Example::

    def test_step(portable_device):
        model = torch.nn.Linear(4, 2).to(portable_device.device)
        ...

    @pytest.mark.emulated_npu(devices=2)
    def test_two_cards(emulated_npu):
        assert emulated_npu.device_count() == 2

Nothing here imports torch, or builds anything, unless the session asks for the emulator:
``TORCHPORT_EMULATE=npu[:N]`` installs it at ``import torch`` (torch's backend autoload), and
a session whose tests use these fixtures gets the device guard registered after collection,
before any test runs (torch's autograd engine sizes its device queues at the first backward).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

#: the ids ``portable_device`` is parametrized with (cuda only where available)
PORTABLE_DEVICES = ("cpu", "npu", "cuda")


_FIXTURES = ("emulated_npu", "portable_device")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "emulated_npu(devices=1, fallback_ops=(), overflow_mode='inf', perturb=None): "
        "configure the emulated NPU installed by the emulated_npu / portable_device fixtures",
    )


def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    """Register the npu device guard before the first test when some test uses the emulator: through the
    fixtures, or -- for a fixture that asks for ``emulated_npu`` at run time (``request.getfixturevalue``),
    which collection cannot see -- through the ``emulated_npu`` marker."""
    def uses_emulator(item: Any) -> bool:
        return (any(name in _FIXTURES for name in getattr(item, "fixturenames", ()))
                or item.get_closest_marker("emulated_npu") is not None)

    if not any(uses_emulator(item) for item in items):
        return
    try:
        from torchport.emulate import prepare

        prepare()
    except Exception:  # torch missing, or no compiler: the fixtures report it, with the fix
        pass


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def portable_device_params() -> list[str]:
    """``["cpu", "npu"]`` plus ``"cuda"`` when a GPU is present."""
    return [d for d in PORTABLE_DEVICES if d != "cuda" or _cuda_available()]


def pytest_generate_tests(metafunc: Any) -> None:
    if "portable_device" in metafunc.fixturenames:
        params = portable_device_params()
        metafunc.parametrize("portable_device", params, indirect=True, ids=params)


def _marker_kwargs(request: Any) -> dict[str, Any]:
    marker = request.node.get_closest_marker("emulated_npu")
    return dict(marker.kwargs) if marker is not None else {}


@pytest.fixture
def emulated_npu(request: Any) -> Iterator[Any]:
    """The emulated NPU for one test; yields ``torch.npu``. Configure with ``@pytest.mark.emulated_npu``."""
    from torchport.emulate import emulated
    from torchport.runtime import device as runtime_device

    runtime_device.reset_selection()
    with emulated(**_marker_kwargs(request)) as npu:
        try:
            yield npu
        finally:
            runtime_device.reset_selection()


@pytest.fixture
def portable_device(request: Any) -> Iterator[Any]:
    """A selected :class:`~torchport.runtime.device.Target` for each of cpu, emulated npu, cuda."""
    from torchport.runtime import device as runtime_device

    kind = getattr(request, "param", "cpu")
    runtime_device.reset_selection()
    try:
        if kind == "npu":
            from torchport.emulate import emulated

            with emulated(**_marker_kwargs(request)):
                yield runtime_device.select_device("npu", index=0)
        else:
            if kind == "cuda" and not _cuda_available():
                pytest.skip("cuda is not available here")
            yield runtime_device.select_device(kind, index=0 if kind != "cpu" else None)
    finally:
        runtime_device.reset_selection()
