"""The HIP device plugged into the emulated HAL: ``HipHalDevice`` runs ``rocm-hsaco-fb`` dispatches on an AMD
GPU through the HIP runtime (``engine.runtime.hal.hip.context``). It is the CUDA device
(``cuda_hal_device``) over another driver API: the same mirrored memory, one stream, IREE's kernel argument
layout (HIP's HAL packs them as CUDA's does), batches with one synchronisation, CUDA-style events for
profiles, and ``HIP1`` executables (``vmfb.hip1``) whose modules are HSACO code objects.

It answers ``hal.device.id`` as ``hip``, like IREE's HIP driver.

UNVERIFIED ON HARDWARE: no AMD GPU was at hand where this was written; only its refusal without the HIP
runtime is tested there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.runtime.hal.cuda_hal_device import CudaHalDevice
from engine.runtime.vmfb.hip1 import HIP_FORMAT, read_hip1


class HipHalDevice(CudaHalDevice):
    """The HAL device over HIP device ``index`` (``hip://N``)."""

    identifier = "hip"
    executable_format = HIP_FORMAT
    vendor = "HIP"

    @staticmethod
    def open_context(index: int) -> Any:
        from engine.runtime.hal.hip.context import HipContext

        return HipContext(index)

    @staticmethod
    def read_definition(data: np.ndarray) -> Any:
        return read_hip1(data)

    @staticmethod
    def module_image(module: Any) -> str | bytes:
        return module.hsaco
