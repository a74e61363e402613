"""The HIP runtime API (``libamdhip64.so``) through ctypes, loaded on first use.

The engine stays importable without ROCm: nothing here touches the library until a function is called, and
a machine without it gets one :class:`HipUnavailableError` whose message says so in one sentence
(``NO_RUNTIME``). IREE's own HIP HAL loads the same library dynamically (``dynamic_symbols.c``).

UNVERIFIED ON HARDWARE: written against AMD's documented HIP runtime API; the machine it was written on has
no AMD GPU and no ROCm, so only the no-runtime path is exercised by the tests here.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from engine.errors import HipError, HipUnavailableError
from engine.runtime.hal.driver_api import DriverLibrary

LIBRARIES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6")
NO_RUNTIME = (
    "no HIP runtime (libamdhip64.so, ROCm) on this machine; the debug engine cannot run HIP builds here: "
    "run with --engine=reference on a machine with ROCm, or rebuild for llvm-cpu or vulkan-spirv"
)

HIP_SUCCESS = 0
HIP_ERROR_NO_DEVICE = 100



@dataclass(frozen=True)
class HipDeviceInfo:
    """One HIP device as ``hipDeviceGet*`` describes it (its ``gfx`` architecture is not among what the
    runtime's plain functions report: a build's code objects name theirs)."""

    index: int
    name: str
    total_memory: int  # bytes
    uuid: str | None = None


def _initialise(lib: ctypes.CDLL) -> str | None:
    lib.hipGetErrorName.restype = ctypes.c_char_p
    lib.hipGetErrorName.argtypes = [ctypes.c_int]
    result = lib.hipInit(0)
    if result != HIP_SUCCESS:
        return f"the HIP runtime failed to initialise: hipInit returned {error_name(lib, result)}"
    return None


_LIBRARY = DriverLibrary(LIBRARIES, NO_RUNTIME, HipUnavailableError, _initialise)


def library() -> ctypes.CDLL:
    """The runtime library, initialised (``hipInit``) once; ``HipUnavailableError`` when there is none."""
    return _LIBRARY.get()


def error_name(lib: ctypes.CDLL, result: int) -> str:
    """``hipError...`` for a ``hipError_t`` (the number when the runtime does not name it)."""
    try:
        name = lib.hipGetErrorName(result)
    except Exception:  # noqa: BLE001 - naming an error must not raise another
        name = None
    return name.decode("ascii", errors="replace") if name else f"hipError_t {result}"


def check(lib: ctypes.CDLL, result: int, call: str) -> None:
    if result != HIP_SUCCESS:
        raise HipError(f"{call} failed", error_name(lib, result))


def list_hip_devices() -> list[HipDeviceInfo]:
    """Every HIP device the runtime reports; ``HipUnavailableError`` when there is no runtime."""
    lib = library()
    count = ctypes.c_int()
    result = lib.hipGetDeviceCount(ctypes.byref(count))
    if result == HIP_ERROR_NO_DEVICE:
        return []
    check(lib, result, "hipGetDeviceCount")
    devices = []
    for index in range(count.value):
        device = ctypes.c_int()
        check(lib, lib.hipDeviceGet(ctypes.byref(device), index), "hipDeviceGet")
        name = ctypes.create_string_buffer(256)
        check(lib, lib.hipDeviceGetName(name, len(name), device), "hipDeviceGetName")
        memory = ctypes.c_size_t()
        check(lib, lib.hipDeviceTotalMem(ctypes.byref(memory), device), "hipDeviceTotalMem")
        devices.append(
            HipDeviceInfo(index, name.value.decode("utf-8", errors="replace"), memory.value, _uuid(lib, device))
        )
    return devices


def _uuid(lib: ctypes.CDLL, device: ctypes.c_int) -> str | None:
    """``hipDeviceGetUuid`` as ``GPU-<hex>`` (ROCm prints the 16 bytes as text); None where not reported."""
    raw = ctypes.create_string_buffer(16)
    try:
        if lib.hipDeviceGetUuid(raw, device) != HIP_SUCCESS:
            return None
    except AttributeError:  # an older runtime
        return None
    text = raw.raw.rstrip(b"\0")
    if text and all(32 < b < 127 for b in text):
        return f"GPU-{text.decode('ascii')}"
    return f"GPU-{raw.raw.hex()}"
