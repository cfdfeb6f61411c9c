"""``torch_npu.testing`` (emulated): the helpers torch_npu's own test files import.

``testcase`` (``TestCase`` with ``assertRtolEqual``, ``run_tests``), ``common_utils``
(``SupportedDevices``, ``create_common_tensor``, ``freeze_rng_state``) and
``common_distributed`` (``skipIfUnsupportMultiNPU``, ``with_comms``), written for the emulator
so that Ascend/pytorch's tests run unchanged (``tools/torch_npu_suite.py``). Like torch's own
test helpers they need ``expecttest`` (``pip install expecttest``).
"""

__torchport_emulated__ = True
__all__ = []
