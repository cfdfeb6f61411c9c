"""``torch_npu.utils._dynamo`` (emulated): register the npu device interface with TorchDynamo."""

import torch

__torchport_emulated__ = True
__all__ = ["_dynamo_register_interface_for_device"]


def _dynamo_register_interface_for_device() -> None:
    """``torch._dynamo.device_interface.register_interface_for_device("npu", ...)`` for the emulated NPU."""
    from torch._dynamo import device_interface as di

    npu = torch.npu

    class NpuInterface(di.DeviceInterface):
        device = npu.device
        Event = npu.Event
        Stream = npu.Stream

        class Worker:
            set_device = staticmethod(npu.set_device)
            current_device = staticmethod(npu.current_device)

            @staticmethod
            def get_device_properties(device=None):
                return npu.get_device_properties(device)

        current_device = staticmethod(npu.current_device)
        set_device = staticmethod(npu.set_device)
        device_count = staticmethod(npu.device_count)
        stream = staticmethod(npu.stream)
        current_stream = staticmethod(npu.current_stream)
        set_stream = staticmethod(npu.set_stream)
        synchronize = staticmethod(npu.synchronize)
        get_device_properties = staticmethod(npu.get_device_properties)
        is_available = staticmethod(npu.is_available)

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            from torch_npu import _C

            return _C._npu_getCurrentRawStream(device_idx)

        @staticmethod
        def get_compute_capability(device=None):
            return ""

    di.register_interface_for_device("npu", NpuInterface)
    for i in range(npu.device_count()):
        di.register_interface_for_device(f"npu:{i}", NpuInterface)
