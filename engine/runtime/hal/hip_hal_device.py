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

from engine.errors import ExecutableFormatError
from engine.runtime.hal.cuda_hal_device import CudaHalDevice
from engine.runtime.hal.device import HalExecutable
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vmfb.hip1 import HIP_FORMAT, other_architectures, read_hip1


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

    def load_executable_binary(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        """A code object loads only on the ``gfx`` target it was built for: one built for another is refused
        with both targets named (the runtime's own answer is ``hipErrorNoBinaryForGpu``)."""
        if executable_format == self.executable_format:
            self._refuse_other_architecture(data, label)
        return super().load_executable_binary(executable_format, data, constants, label)

    def _refuse_other_architecture(self, data: np.ndarray, label: str) -> None:
        device_arch = self.cuda.info.arch  # None where IREE's driver did not report it: the load decides
        if device_arch is None:
            return
        try:
            other = other_architectures(read_hip1(np.asarray(data, dtype=np.uint8)), device_arch)
        except ExecutableFormatError:  # a damaged executable is the load's to report
            return
        if other:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"cannot load executable {label}: it was built for {', '.join(other)}, and this device "
                f"({self.cuda.info.name}) is {device_arch}: rebuild with --iree-rocm-target={device_arch}",
            )
