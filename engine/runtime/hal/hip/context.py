"""One HIP device's runtime objects through ctypes (``DriverApiContext`` with HIP's function names): one
stream, device memory, HSACO modules, kernel launches and events. The calling thread selects the device with
``hipSetDevice`` before each call.

UNVERIFIED ON HARDWARE: written against AMD's documented HIP runtime API and IREE's HIP HAL
(``runtime/src/iree/hal/drivers/hip``); the machine it was written on has no AMD GPU.
"""

from __future__ import annotations

import ctypes

from engine.errors import HipError, HipUnavailableError
from engine.runtime.hal.driver_api import DriverApi, DriverApiContext
from engine.runtime.hal.hip.driver import error_name, library, list_hip_devices

HIP_API = DriverApi(
    vendor="HIP",
    malloc="hipMalloc",
    free="hipFree",
    copy_to_device="hipMemcpyHtoDAsync",
    copy_to_host="hipMemcpyDtoHAsync",
    stream_create="hipStreamCreateWithFlags",
    stream_synchronize="hipStreamSynchronize",
    stream_destroy="hipStreamDestroy",
    module_load="hipModuleLoadDataEx",
    module_get_function="hipModuleGetFunction",
    function_set_attribute="hipFuncSetAttribute",
    launch="hipModuleLaunchKernel",
    event_create="hipEventCreateWithFlags",
    event_record="hipEventRecord",
    event_synchronize="hipEventSynchronize",
    event_elapsed="hipEventElapsedTime",
    event_destroy="hipEventDestroy",
)


class HipContext(DriverApiContext):
    """HIP device ``index``, selected on the calling thread (``hipSetDevice``) for each call."""

    api = HIP_API
    error_type = HipError

    def __init__(self, index: int = 0):
        devices = list_hip_devices()  # HipUnavailableError without a runtime
        if not devices:
            raise HipUnavailableError("the HIP runtime reports no device")
        if not 0 <= index < len(devices):
            raise HipUnavailableError(f"no HIP device {index}; this machine has {len(devices)}")
        self.info = devices[index]
        self.index = index
        lib = library()
        self._bind(lib)
        lib.hipSetDevice.argtypes = [ctypes.c_int]
        self.current()
        self._open_stream()
        self._finalize_with(_close, lib, index, self.stream.value)

    def current(self) -> None:
        self.check(self.lib.hipSetDevice(self.index), "hipSetDevice")

    def error_name(self, result: int) -> str:
        return error_name(self.lib, result)

    def shared_memory_opt_in(self, dynamic_shared_bytes: int) -> bool:
        return True  # IREE's HIP HAL sets the kernel's dynamic shared memory size whatever it is


def _close(lib: ctypes.CDLL, index: int, stream: int | None) -> None:
    """Destroy a context object's stream (a finalizer: never raises)."""
    try:
        lib.hipSetDevice(index)
        lib.hipStreamDestroy(stream)
    except Exception:  # noqa: BLE001 - a finalizer has no one to tell
        pass
