"""One GPU through a vendor's driver API by ctypes: CUDA's (``libcuda``) and HIP's (``libamdhip64``), which IREE's
CUDA and HIP HALs call the same way: device memory, one stream, modules loaded from an image (PTX text or an
HSACO code object), kernel launches with IREE's argument layout (``cuda.abi``), and events that time them.

The two APIs differ in their function names and in how a thread selects the device (CUDA: a primary
context made current; HIP: ``hipSetDevice``), so ``DriverApiContext`` does the work once and ``DriverApi``
names the functions; ``cuda.context`` and ``hip.context`` are those specs. Every function gets its
``argtypes``/``restype`` once (ctypes would otherwise pass a 64-bit device pointer as a 32-bit ``int``).
Device pointers, modules, functions, streams and events are plain integers here.

UNVERIFIED ON HARDWARE: written against NVIDIA's and AMD's documented driver APIs and IREE's CUDA and HIP
HALs (``runtime/src/iree/hal/drivers/{cuda,hip}``); the machine it was written on has no GPU of either kind.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable
from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint64, c_void_p
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import GpuDriverError
from engine.runtime.hal.cuda.abi import LaunchShape

JIT_ERROR_LOG_BUFFER = 5  # CU_JIT_ERROR_LOG_BUFFER / hipJitOptionErrorLogBuffer
JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CU_FUNC_ATTRIBUTE_... / hipFuncAttributeMaxDynamicSharedMemorySize
STREAM_NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING / hipStreamNonBlocking
JIT_LOG_BYTES = 8192


def dashed_uuid(raw: bytes) -> str:
    """16 UUID bytes as IREE's CUDA and HIP drivers name a device (``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``,
    each byte in hex, as ``nvidia-smi -L`` prints it): the name ``cuda://GPU-...``/``hip://GPU-...`` take in
    both engines."""
    h = bytes(raw[:16]).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class DriverLibrary:
    """A vendor's driver library, loaded and initialised once, on first use; every later call after a failure
    raises the same one-sentence error (``unavailable(message)``) without trying again."""

    def __init__(
        self,
        names: tuple[str, ...],
        missing: str,
        unavailable: type[GpuDriverError],
        initialise: Callable[[ctypes.CDLL], str | None],
    ):
        self.names = names
        self.missing = missing  # the sentence when no library loads
        self.unavailable = unavailable
        self.initialise = initialise  # None when the library is ready, else why it is not
        self._lock = threading.Lock()
        self._library: ctypes.CDLL | None = None
        self._error: str | None = None

    def get(self) -> ctypes.CDLL:
        with self._lock:
            if self._library is not None:
                return self._library
            if self._error is None:
                self._error = self._load()
            if self._error is not None:
                raise self.unavailable(self._error)
            return self._library  # type: ignore[return-value]

    def _load(self) -> str | None:
        for name in self.names:
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            failure = self.initialise(lib)
            if failure is None:
                self._library = lib
            return failure
        return self.missing


@dataclass(frozen=True)
class DriverApi:
    """The names of one driver API's functions (each takes what its CUDA counterpart takes, in order)."""

    vendor: str  # "CUDA" or "HIP", for messages
    malloc: str
    free: str
    copy_to_device: str
    copy_to_host: str
    stream_create: str
    stream_synchronize: str
    stream_destroy: str
    module_load: str
    module_get_function: str
    function_set_attribute: str
    launch: str
    event_create: str
    event_record: str
    event_synchronize: str
    event_elapsed: str
    event_destroy: str

    def signatures(self) -> dict[str, tuple[Any, list]]:
        return {
            self.malloc: (c_int, [POINTER(c_uint64), c_size_t]),
            self.free: (c_int, [c_uint64]),
            self.copy_to_device: (c_int, [c_uint64, c_void_p, c_size_t, c_void_p]),
            self.copy_to_host: (c_int, [c_void_p, c_uint64, c_size_t, c_void_p]),
            self.stream_create: (c_int, [POINTER(c_void_p), c_uint]),
            self.stream_synchronize: (c_int, [c_void_p]),
            self.stream_destroy: (c_int, [c_void_p]),
            self.module_load: (c_int, [POINTER(c_void_p), c_char_p, c_uint, POINTER(c_int), POINTER(c_void_p)]),
            self.module_get_function: (c_int, [POINTER(c_void_p), c_void_p, c_char_p]),
            self.function_set_attribute: (c_int, [c_void_p, c_int, c_int]),
            self.launch: (
                c_int,
                [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p, POINTER(c_void_p), c_void_p],
            ),
            self.event_create: (c_int, [POINTER(c_void_p), c_uint]),
            self.event_record: (c_int, [c_void_p, c_void_p]),
            self.event_synchronize: (c_int, [c_void_p]),
            self.event_elapsed: (c_int, [POINTER(c_float), c_void_p, c_void_p]),
            self.event_destroy: (c_int, [c_void_p]),
        }


@dataclass(frozen=True)
class GpuKernel:
    """A loaded kernel: its function handle and name."""

    function: int
    name: str


class DriverApiContext:
    """One device's stream and memory through a driver API. A subclass opens the device and says how a thread
    selects it (``current``), how a result is named (``error_name``) and when dynamic shared memory needs the
    kernel's opt-in (``shared_memory_opt_in``)."""

    api: DriverApi
    info: Any  # the device's description (CudaDeviceInfo, HipDeviceInfo)
    error_type: type[GpuDriverError] = GpuDriverError  # CudaError, HipError

    def _bind(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.fn = {}
        for name, (restype, argtypes) in self.api.signatures().items():
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
            self.fn[name] = function

    def _open_stream(self) -> None:
        stream = c_void_p()
        self.check(self.fn[self.api.stream_create](byref(stream), STREAM_NON_BLOCKING), self.api.stream_create)
        self.stream = stream

    # -- what a subclass says

    def current(self) -> None:
        """Make the device the calling thread's (a session's run thread is not the one that opened it)."""
        raise NotImplementedError

    def error_name(self, result: int) -> str:
        raise NotImplementedError

    def shared_memory_opt_in(self, dynamic_shared_bytes: int) -> bool:
        return dynamic_shared_bytes > 0

    def check(self, result: int, call: str) -> None:
        """Raise ``error_type`` (a ``HalError``) naming ``call`` and the driver's error."""
        if result != 0:
            raise self.error_type(f"{call} failed", self.error_name(result))

    # -- memory

    def allocate(self, size: int) -> int:
        self.current()
        pointer = c_uint64()
        self.check(self.fn[self.api.malloc](byref(pointer), max(size, 4)), f"{self.api.malloc}({size} bytes)")
        return pointer.value

    def free(self, pointer: int) -> None:
        self.current()
        self.check(self.fn[self.api.free](pointer), self.api.free)

    def release(self, pointer: int) -> None:
        """Free device memory for a finalizer: never raises (at exit the driver may already be going)."""
        try:
            self.current()
            self.fn[self.api.free](pointer)
        except Exception:  # noqa: BLE001 - a finalizer has no one to tell
            pass

    def upload(self, pointer: int, data: np.ndarray) -> None:
        """Queue a host → device copy on the stream (``data`` must stay alive until ``synchronize``)."""
        self.current()
        if data.nbytes:
            call = self.api.copy_to_device
            self.check(self.fn[call](pointer, data.ctypes.data, data.nbytes, self.stream), call)

    def download(self, pointer: int, out: np.ndarray) -> None:
        """Copy device bytes into ``out`` after everything queued on the stream (one sync)."""
        self.current()
        if out.nbytes:
            call = self.api.copy_to_host
            self.check(self.fn[call](out.ctypes.data, pointer, out.nbytes, self.stream), call)
        self.synchronize()

    def synchronize(self) -> None:
        self.current()
        self.check(self.fn[self.api.stream_synchronize](self.stream), self.api.stream_synchronize)

    # -- kernels

    def load_module(self, image: str | bytes) -> int:
        """A module from its image (PTX text, an HSACO code object); the JIT's error log is in the error."""
        self.current()
        data = image.encode() + b"\0" if isinstance(image, str) else bytes(image)
        log = ctypes.create_string_buffer(JIT_LOG_BYTES)
        options = (c_int * 2)(JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (c_void_p * 2)(ctypes.cast(log, c_void_p).value, JIT_LOG_BYTES)
        module = c_void_p()
        result = self.fn[self.api.module_load](byref(module), data, 2, options, values)
        if result:
            detail = log.value.decode("utf-8", errors="replace").strip()
            message = f"{self.api.module_load} failed" + (f"; {detail}" if detail else "")
            raise self.error_type(message, self.error_name(result))
        return int(module.value or 0)

    def kernel(self, module: int, name: str, dynamic_shared_bytes: int) -> GpuKernel:
        self.current()
        function = c_void_p()
        call = self.api.module_get_function
        self.check(self.fn[call](byref(function), module, name.encode()), f"{call}({name})")
        if self.shared_memory_opt_in(dynamic_shared_bytes):
            call = self.api.function_set_attribute
            self.check(
                self.fn[call](function, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_shared_bytes),
                f"{call}(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            )
        return GpuKernel(int(function.value or 0), name)

    def launch(self, kernel: GpuKernel, shape: LaunchShape, params: ctypes.Array) -> None:
        """Queue one launch on the stream (the driver copies the parameters at the call)."""
        self.current()
        gx, gy, gz = shape.grid
        bx, by, bz = shape.block
        self.check(
            self.fn[self.api.launch](
                kernel.function, gx, gy, gz, bx, by, bz, shape.shared_memory_bytes, self.stream,
                ctypes.cast(params, POINTER(c_void_p)), None,
            ),
            f"{self.api.launch}({kernel.name})",
        )  # fmt: skip

    # -- events (timing zones)

    def record_event(self) -> int:
        """A new event recorded on the stream (it completes when the work queued before it has)."""
        self.current()
        event = c_void_p()
        self.check(self.fn[self.api.event_create](byref(event), 0), self.api.event_create)
        self.check(self.fn[self.api.event_record](event, self.stream), self.api.event_record)
        return int(event.value or 0)

    def elapsed_since(self, start: int, events: list[int]) -> list[float]:
        """Milliseconds from ``start`` to each of ``events`` (recorded after it on the stream, in order; waits
        for the last). Every event is destroyed, also when the driver fails to time one."""
        self.current()
        try:
            times = []
            if events:
                self.check(self.fn[self.api.event_synchronize](events[-1]), self.api.event_synchronize)
            for event in events:
                ms = c_float()
                self.check(self.fn[self.api.event_elapsed](byref(ms), start, event), self.api.event_elapsed)
                times.append(float(ms.value))
            return times
        finally:
            self.destroy_events([start, *events])

    def destroy_events(self, events: list[int]) -> None:
        for event in events:
            self.fn[self.api.event_destroy](event)

    def _finalize_with(self, close, *args) -> None:
        """Release the stream (and what the subclass names) with this object. Each allocation's finalizer
        holds the context (``release``), so the context outlives the memory it frees."""
        self._finalizer = weakref.finalize(self, close, *args)
