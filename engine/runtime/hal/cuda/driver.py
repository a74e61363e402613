"""The CUDA driver API (``libcuda.so.1``) through ctypes, loaded on first use.

The engine stays importable without an NVIDIA driver: nothing here touches ``libcuda`` until a function
is called, and a machine without it gets one :class:`CudaUnavailableError` whose message says so in one
sentence (``NO_DRIVER``). ctypes on the driver library is the route IREE's own CUDA HAL takes (it loads
``libcuda`` dynamically too, ``cuda_dynamic_symbols.c``); NVIDIA's ``cuda-bindings`` package would add a
dependency for the few calls used here.

UNVERIFIED ON HARDWARE: written against NVIDIA's documented driver API, but the machine this was written
on has no NVIDIA GPU; only the no-driver path is exercised by the tests here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

from engine.errors import CudaError, CudaUnavailableError
from engine.runtime.hal.driver_api import DriverLibrary, dashed_uuid

LIBRARY = "libcuda.so.1"
NO_DRIVER = (
    f"no CUDA driver ({LIBRARY}) on this machine; the debug engine cannot run CUDA builds here: "
    "run with --engine=reference on a machine with an NVIDIA driver, or rebuild for llvm-cpu or vulkan-spirv"
)

CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
# CUdevice_attribute values (cuda.h).
ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76



@dataclass(frozen=True)
class CudaDeviceInfo:
    """One CUDA device as ``cuDeviceGet*`` describes it."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    total_memory: int  # bytes
    multiprocessors: int
    uuid: str | None = None  # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it

    @property
    def sm(self) -> str:
        """IREE's target name for the device's compute capability: ``sm_80``."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


def _initialise(lib: ctypes.CDLL) -> str | None:
    result = lib.cuInit(0)
    if result != CUDA_SUCCESS:
        return f"the CUDA driver ({LIBRARY}) failed to initialise: cuInit returned {error_name(lib, result)}"
    return None


_LIBRARY = DriverLibrary((LIBRARY,), NO_DRIVER, CudaUnavailableError, _initialise)


def library() -> ctypes.CDLL:
    """The driver library, initialised (``cuInit``) once; ``CudaUnavailableError`` when there is none."""
    return _LIBRARY.get()


def error_name(lib: ctypes.CDLL, result: int) -> str:
    """``CUDA_ERROR_...`` for a ``CUresult`` (the number when the driver does not name it)."""
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(result, ctypes.byref(name)) == CUDA_SUCCESS and name.value:
        return name.value.decode("ascii", errors="replace")
    return f"CUresult {result}"


def check(lib: ctypes.CDLL, result: int, call: str) -> None:
    """Raise ``CudaError`` naming ``call`` and the driver's error when ``result`` is not success."""
    if result != CUDA_SUCCESS:
        raise CudaError(f"{call} failed", error_name(lib, result))


def list_cuda_devices() -> list[CudaDeviceInfo]:
    """Every CUDA device the driver reports; ``CudaUnavailableError`` when there is no driver."""
    lib = library()
    count = ctypes.c_int()
    result = lib.cuDeviceGetCount(ctypes.byref(count))
    if result == CUDA_ERROR_NO_DEVICE:
        return []
    check(lib, result, "cuDeviceGetCount")
    devices = []
    for index in range(count.value):
        device = ctypes.c_int()
        check(lib, lib.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
        name = ctypes.create_string_buffer(256)
        check(lib, lib.cuDeviceGetName(name, len(name), device), "cuDeviceGetName")
        memory = ctypes.c_size_t()
        check(lib, lib.cuDeviceTotalMem_v2(ctypes.byref(memory), device), "cuDeviceTotalMem")

        devices.append(
            CudaDeviceInfo(
                index=index,
                name=name.value.decode("utf-8", errors="replace"),
                compute_capability=(
                    _attribute(lib, device, ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major"),
                    _attribute(lib, device, ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor"),
                ),
                total_memory=memory.value,
                multiprocessors=_attribute(lib, device, ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"),
                uuid=_uuid(lib, device),
            )
        )
    return devices


def _attribute(lib: ctypes.CDLL, device: ctypes.c_int, which: int, what: str) -> int:
    value = ctypes.c_int()
    check(lib, lib.cuDeviceGetAttribute(ctypes.byref(value), which, device), f"cuDeviceGetAttribute({what})")
    return value.value


def _uuid(lib: ctypes.CDLL, device: ctypes.c_int) -> str | None:
    """``cuDeviceGetUuid`` as ``nvidia-smi`` writes it; None where the driver does not say."""
    raw = ctypes.create_string_buffer(16)  # CUuuid: 16 bytes
    try:
        if lib.cuDeviceGetUuid(raw, device) != CUDA_SUCCESS:
            return None
    except AttributeError:  # a driver older than CUDA 9.2
        return None
    return dashed_uuid(raw.raw)
