"""The scanner's rules, one module per category; :data:`ALL_RULES` is the explicit list.

Adding a rule: write the class in its category module (codes: TP1xx device placement
and device API, TP2xx AMP, TP3xx distributed, TP4xx data loading, TP5xx checkpoints,
TP6xx single-backend dialects (NPU/XPU/MPS), TP8xx torchport's own comments, TP9xx noisy/off by default), add it below, add ``tests/fixtures/migrate/<CODE>/``, and
regenerate the docs with ``torchport rules --docs docs/rules``.
"""

from __future__ import annotations

from torchport.migrate.rules import amp, data, device_api, dialects, distributed, noqa, placement, serialization
from torchport.migrate.rules.base import Rule

__all__ = ["ALL_RULES", "Rule"]

ALL_RULES: tuple[type[Rule], ...] = (
    placement.CudaMethod,
    placement.CudaDeviceConstructor,
    placement.CudaDeviceArgument,
    placement.CudaDeviceString,
    placement.IsCudaAttribute,
    placement.CudaTensorType,
    placement.CudaAvailabilityIdiom,
    placement.CudaFlag,
    placement.IntDeviceIndex,
    device_api.CudaIsAvailable,
    device_api.CudaDeviceQuery,
    device_api.CudaSetDevice,
    device_api.CudaSynchronize,
    device_api.CudaMemoryApi,
    device_api.CudaRngApi,
    device_api.CudaStreamEvent,
    device_api.CudaNvtx,
    device_api.CudnnKnob,
    device_api.CudaVisibleDevices,
    device_api.CudaApiOther,
    amp.CudaAmpAutocast,
    amp.CudaAmpGradScaler,
    amp.AutocastCudaDevice,
    amp.GradScalerDefaultDevice,
    amp.ApexAmp,
    distributed.NcclBackend,
    distributed.DdpDeviceIds,
    distributed.DataParallel,
    data.PinMemoryHardcoded,
    data.PinMemoryCall,
    serialization.LoadMapLocationCuda,
    serialization.LoadCudaCheckpoint,
    serialization.LoadWithoutMapLocation,
    dialects.BackendMethod,
    dialects.BackendDeviceString,
    dialects.HcclBackend,
    dialects.TorchNpuImport,
    dialects.BackendApi,
    dialects.BackendTuningKnob,
    dialects.BackendVisibleDevices,
    dialects.MpsAvailability,
    dialects.BackendFlag,
    noqa.UnusedNoqa,
)
