"""One CUDA device's driver objects through ctypes: its primary context, one stream, device memory, PTX
modules, kernel launches and events. What the HAL device (``engine.runtime.hal.cuda_hal_device``) runs on.

Every driver function used here gets its ``argtypes``/``restype`` once (``_bind``): ctypes would otherwise
pass a 64-bit device pointer or handle as a 32-bit ``int``. Errors are ``CudaError`` naming the call and
the driver's ``CUDA_ERROR_...``; a PTX module that does not load carries the JIT's error log.

UNVERIFIED ON HARDWARE: written against NVIDIA's documented driver API and IREE's CUDA HAL
(``runtime/src/iree/hal/drivers/cuda``); the machine it was written on has no NVIDIA GPU.
"""

from __future__ import annotations

import ctypes
import weakref
from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint64, c_void_p
from dataclasses import dataclass

import numpy as np

from engine.errors import CudaError, CudaUnavailableError
from engine.runtime.hal.cuda.abi import LaunchShape
from engine.runtime.hal.cuda.driver import check, library, list_cuda_devices

CU_STREAM_NON_BLOCKING = 1
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
STATIC_SHARED_LIMIT = 48 * 1024  # above it a kernel must opt in to dynamic shared memory (IREE does the same)
JIT_LOG_BYTES = 8192

_SIGNATURES = {
    "cuDeviceGet": (c_int, [POINTER(c_int), c_int]),
    "cuDevicePrimaryCtxRetain": (c_int, [POINTER(c_void_p), c_int]),
    "cuDevicePrimaryCtxRelease_v2": (c_int, [c_int]),
    "cuCtxSetCurrent": (c_int, [c_void_p]),
    "cuStreamCreate": (c_int, [POINTER(c_void_p), c_uint]),
    "cuStreamSynchronize": (c_int, [c_void_p]),
    "cuStreamDestroy_v2": (c_int, [c_void_p]),
    "cuMemAlloc_v2": (c_int, [POINTER(c_uint64), c_size_t]),
    "cuMemFree_v2": (c_int, [c_uint64]),
    "cuMemcpyHtoDAsync_v2": (c_int, [c_uint64, c_void_p, c_size_t, c_void_p]),
    "cuMemcpyDtoHAsync_v2": (c_int, [c_void_p, c_uint64, c_size_t, c_void_p]),
    "cuModuleLoadDataEx": (c_int, [POINTER(c_void_p), c_char_p, c_uint, POINTER(c_int), POINTER(c_void_p)]),
    "cuModuleGetFunction": (c_int, [POINTER(c_void_p), c_void_p, c_char_p]),
    "cuModuleUnload": (c_int, [c_void_p]),
    "cuFuncSetAttribute": (c_int, [c_void_p, c_int, c_int]),
    "cuLaunchKernel": (
        c_int,
        [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p, POINTER(c_void_p), c_void_p],
    ),
    "cuEventCreate": (c_int, [POINTER(c_void_p), c_uint]),
    "cuEventRecord": (c_int, [c_void_p, c_void_p]),
    "cuEventSynchronize": (c_int, [c_void_p]),
    "cuEventElapsedTime": (c_int, [POINTER(c_float), c_void_p, c_void_p]),
    "cuEventDestroy_v2": (c_int, [c_void_p]),
}


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


@dataclass(frozen=True)
class CudaKernel:
    """A loaded kernel: its ``CUfunction`` handle and the module that holds it."""

    function: int
    name: str


class CudaContext:
    """The primary context of CUDA device ``index``, made current on the calling thread for each call."""

    def __init__(self, index: int = 0):
        devices = list_cuda_devices()  # CudaUnavailableError without a driver
        if not devices:
            raise CudaUnavailableError("the CUDA driver reports no device")
        if not 0 <= index < len(devices):
            raise CudaUnavailableError(f"no CUDA device {index}; this machine has {len(devices)}")
        self.info = devices[index]
        self.lib = _bind(library())
        device = c_int()
        check(self.lib, self.lib.cuDeviceGet(byref(device), index), "cuDeviceGet")
        self.device = device
        context = c_void_p()
        check(self.lib, self.lib.cuDevicePrimaryCtxRetain(byref(context), device), "cuDevicePrimaryCtxRetain")
        self.context = context
        self.current()
        stream = c_void_p()
        check(self.lib, self.lib.cuStreamCreate(byref(stream), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self.stream = stream
        # The stream and the primary context's reference go with this object. Each allocation's finalizer
        # holds the context (``release``), so the context outlives the memory it frees.
        self._finalizer = weakref.finalize(self, _close, self.lib, context.value, stream.value, device.value)

    def current(self) -> None:
        """Make the context current on this thread (a session's run thread is not the one that opened it)."""
        check(self.lib, self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    # -- memory -------------------------------------------------------------------------------------------

    def allocate(self, size: int) -> int:
        self.current()
        pointer = c_uint64()
        check(self.lib, self.lib.cuMemAlloc_v2(byref(pointer), max(size, 4)), f"cuMemAlloc({size} bytes)")
        return pointer.value

    def free(self, pointer: int) -> None:
        self.current()
        check(self.lib, self.lib.cuMemFree_v2(pointer), "cuMemFree")

    def release(self, pointer: int) -> None:
        """``cuMemFree`` for a finalizer: never raises (at exit the driver may already be shutting down)."""
        try:
            self.lib.cuCtxSetCurrent(self.context)
            self.lib.cuMemFree_v2(pointer)
        except Exception:  # noqa: BLE001 - a finalizer has no one to tell
            pass

    def upload(self, pointer: int, data: np.ndarray) -> None:
        """Queue a host → device copy on the stream (``data`` must stay alive until ``synchronize``)."""
        self.current()
        if data.nbytes:
            check(
                self.lib,
                self.lib.cuMemcpyHtoDAsync_v2(pointer, data.ctypes.data, data.nbytes, self.stream),
                "cuMemcpyHtoDAsync",
            )

    def download(self, pointer: int, out: np.ndarray) -> None:
        """Copy device bytes into ``out`` after everything queued on the stream (one sync)."""
        self.current()
        if out.nbytes:
            check(
                self.lib,
                self.lib.cuMemcpyDtoHAsync_v2(out.ctypes.data, pointer, out.nbytes, self.stream),
                "cuMemcpyDtoHAsync",
            )
        self.synchronize()

    def synchronize(self) -> None:
        self.current()
        check(self.lib, self.lib.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # -- kernels ------------------------------------------------------------------------------------------

    def load_module(self, ptx: str) -> int:
        """``cuModuleLoadDataEx`` of a PTX text; the JIT's error log is in the error when it fails."""
        self.current()
        log = ctypes.create_string_buffer(JIT_LOG_BYTES)
        options = (c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (c_void_p * 2)(ctypes.cast(log, c_void_p).value, JIT_LOG_BYTES)
        module = c_void_p()
        result = self.lib.cuModuleLoadDataEx(byref(module), ptx.encode() + b"\0", 2, options, values)
        if result:
            detail = log.value.decode("utf-8", errors="replace").strip()
            try:
                check(self.lib, result, "cuModuleLoadDataEx")
            except CudaError as e:
                raise CudaError(f"{e}; {detail}" if detail else str(e), e.result) from None
        return int(module.value or 0)

    def kernel(self, module: int, name: str, dynamic_shared_bytes: int) -> CudaKernel:
        function = c_void_p()
        check(self.lib, self.lib.cuModuleGetFunction(byref(function), module, name.encode()), f"cuModuleGetFunction({name})")
        if dynamic_shared_bytes > STATIC_SHARED_LIMIT:
            check(
                self.lib,
                self.lib.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_shared_bytes),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            )
        return CudaKernel(int(function.value or 0), name)

    def launch(self, kernel: CudaKernel, shape: LaunchShape, params: ctypes.Array) -> None:
        """Queue one ``cuLaunchKernel`` on the stream (the driver copies the parameters at the call)."""
        self.current()
        gx, gy, gz = shape.grid
        bx, by, bz = shape.block
        check(
            self.lib,
            self.lib.cuLaunchKernel(
                kernel.function, gx, gy, gz, bx, by, bz, shape.shared_memory_bytes, self.stream,
                ctypes.cast(params, POINTER(c_void_p)), None,
            ),
            f"cuLaunchKernel({kernel.name})",
        )  # fmt: skip

    # -- events (timing zones) ----------------------------------------------------------------------------

    def record_event(self) -> int:
        """A new event recorded on the stream (it completes when the work queued before it has)."""
        self.current()
        event = c_void_p()
        check(self.lib, self.lib.cuEventCreate(byref(event), 0), "cuEventCreate")
        check(self.lib, self.lib.cuEventRecord(event, self.stream), "cuEventRecord")
        return int(event.value or 0)

    def elapsed_since(self, start: int, events: list[int]) -> list[float]:
        """Milliseconds from ``start`` to each of ``events`` (recorded after it on the stream, in order; waits
        for the last). Every event is destroyed, also when the driver fails to time one."""
        self.current()
        try:
            times = []
            if events:
                check(self.lib, self.lib.cuEventSynchronize(events[-1]), "cuEventSynchronize")
            for event in events:
                ms = c_float()
                check(self.lib, self.lib.cuEventElapsedTime(byref(ms), start, event), "cuEventElapsedTime")
                times.append(float(ms.value))
            return times
        finally:
            self.destroy_events([start, *events])

    def destroy_events(self, events: list[int]) -> None:
        for event in events:
            self.lib.cuEventDestroy_v2(event)


def _close(lib: ctypes.CDLL, context: int | None, stream: int | None, device: int) -> None:
    """Destroy a context object's stream and release its primary context (a finalizer: never raises)."""
    try:
        lib.cuCtxSetCurrent(context)
        lib.cuStreamDestroy_v2(stream)
        lib.cuDevicePrimaryCtxRelease_v2(device)
    except Exception:  # noqa: BLE001 - a finalizer has no one to tell
        pass
