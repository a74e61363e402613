"""One CUDA device's driver objects through ctypes (``DriverApiContext`` with CUDA's function names): its
primary context, one stream, device memory, PTX modules, kernel launches and events. What the HAL device
(``engine.runtime.hal.cuda_hal_device``) runs on.

UNVERIFIED ON HARDWARE: written against NVIDIA's documented driver API and IREE's CUDA HAL
(``runtime/src/iree/hal/drivers/cuda``); the machine it was written on has no NVIDIA GPU.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_int, c_void_p

from engine.errors import CudaError, CudaUnavailableError
from engine.runtime.hal.cuda.driver import error_name, library, list_cuda_devices
from engine.runtime.hal.driver_api import DriverApi, DriverApiContext, GpuKernel

CUDA_API = DriverApi(
    vendor="CUDA",
    malloc="cuMemAlloc_v2",
    free="cuMemFree_v2",
    copy_to_device="cuMemcpyHtoDAsync_v2",
    copy_to_host="cuMemcpyDtoHAsync_v2",
    stream_create="cuStreamCreate",
    stream_synchronize="cuStreamSynchronize",
    stream_destroy="cuStreamDestroy_v2",
    module_load="cuModuleLoadDataEx",
    module_get_function="cuModuleGetFunction",
    function_set_attribute="cuFuncSetAttribute",
    launch="cuLaunchKernel",
    event_create="cuEventCreate",
    event_record="cuEventRecord",
    event_synchronize="cuEventSynchronize",
    event_elapsed="cuEventElapsedTime",
    event_destroy="cuEventDestroy_v2",
)
STATIC_SHARED_LIMIT = 48 * 1024  # above it a kernel must opt in to dynamic shared memory

CudaKernel = GpuKernel  # a loaded kernel (the name the CUDA device's code uses)


class CudaContext(DriverApiContext):
    """The primary context of CUDA device ``index``, made current on the calling thread for each call."""

    api = CUDA_API
    error_type = CudaError

    def __init__(self, index: int = 0):
        devices = list_cuda_devices()  # CudaUnavailableError without a driver
        if not devices:
            raise CudaUnavailableError("the CUDA driver reports no device")
        if not 0 <= index < len(devices):
            raise CudaUnavailableError(f"no CUDA device {index}; this machine has {len(devices)}")
        self.info = devices[index]
        lib = library()
        self._bind(lib)
        lib.cuDeviceGet.argtypes = [POINTER(c_int), c_int]
        lib.cuDevicePrimaryCtxRetain.argtypes = [POINTER(c_void_p), c_int]
        lib.cuDevicePrimaryCtxRelease_v2.argtypes = [c_int]
        lib.cuCtxSetCurrent.argtypes = [c_void_p]
        device = c_int()
        self.check(lib.cuDeviceGet(byref(device), index), "cuDeviceGet")
        self.device = device
        context = c_void_p()
        self.check(lib.cuDevicePrimaryCtxRetain(byref(context), device), "cuDevicePrimaryCtxRetain")
        self.context = context
        self.current()
        self._open_stream()
        self._finalize_with(_close, lib, context.value, self.stream.value, device.value)

    def current(self) -> None:
        self.check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def error_name(self, result: int) -> str:
        return error_name(self.lib, result)

    def shared_memory_opt_in(self, dynamic_shared_bytes: int) -> bool:
        return dynamic_shared_bytes > STATIC_SHARED_LIMIT


def _close(lib: ctypes.CDLL, context: int | None, stream: int | None, device: int) -> None:
    """Destroy a context object's stream and release its primary context (a finalizer: never raises)."""
    try:
        lib.cuCtxSetCurrent(context)
        lib.cuStreamDestroy_v2(stream)
        lib.cuDevicePrimaryCtxRelease_v2(device)
    except Exception:  # noqa: BLE001 - a finalizer has no one to tell
        pass
