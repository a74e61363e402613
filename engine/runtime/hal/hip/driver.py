"""The HIP runtime API (``libamdhip64.so``) through ctypes, loaded on first use.

The engine stays importable without ROCm: nothing here touches the library until a function is called, and
a machine without it gets one :class:`HipUnavailableError` whose message says so in one sentence
(``NO_RUNTIME``). IREE's own HIP HAL loads the same library dynamically (``dynamic_symbols.c``).

UNVERIFIED ON HARDWARE: written against AMD's documented HIP runtime API; the machine it was written on has
no AMD GPU and no ROCm, so only the no-runtime path is exercised by the tests here.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, replace

from engine.errors import HipError, HipUnavailableError
from engine.runtime.hal.driver_api import DriverLibrary, dashed_uuid

LIBRARIES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6")
NO_RUNTIME = (
    "no HIP runtime (libamdhip64.so, ROCm) on this machine; the debug engine cannot run HIP builds here: "
    "run with --engine=reference on a machine with ROCm, or rebuild for llvm-cpu or vulkan-spirv"
)

HIP_SUCCESS = 0
HIP_ERROR_NO_DEVICE = 100


@dataclass(frozen=True)
class HipDeviceInfo:
    """One HIP device as ``hipDeviceGet*`` describes it, with its ``gfx`` architecture as IREE's HIP driver
    reports it (``iree_reported_architectures``); None where IREE's driver did not say."""

    index: int
    name: str
    total_memory: int  # bytes
    uuid: str | None = None  # "GPU-xxxxxxxx-xxxx-...", as IREE's HIP driver names the device
    arch: str | None = None  # "gfx942"


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
    if devices:
        architectures = iree_reported_architectures()
        devices = [replace(d, arch=architectures.get(d.uuid or "")) for d in devices]
    return devices


_ARCH_LINE = re.compile(r"^- gpu-arch-name: (gfx[0-9a-f]+)", re.MULTILINE)


def architecture_in_device_info(text: str) -> str | None:
    """The ``gfx`` target in IREE's HIP ``dump_device_info`` text (``- gpu-arch-name: gfx942:sramecc+:xnack-``,
    from ``hipDeviceProp_t.gcnArchName``), without its feature flags; None when the text has none."""
    match = _ARCH_LINE.search(text)
    return match[1] if match else None


def iree_reported_architectures() -> dict[str, str]:
    """Each HIP device's ``gfx`` target by UUID, as IREE's own HIP driver reports it. ``hipDeviceProp_t``, where
    the runtime keeps it, changes layout between HIP releases, so it is not read here; IREE's driver reads it
    with the struct it was built against. Empty when IREE's driver cannot say."""
    try:
        import iree.runtime as rt

        driver = rt.get_driver("hip")
        found = {}
        for device in driver.query_available_devices():
            arch = architecture_in_device_info(driver.dump_device_info(device["device_id"]))
            path = str(device.get("path", "")).lower()
            if arch and path.startswith("gpu-"):
                found["GPU-" + path[4:]] = arch
        return found
    except Exception:  # noqa: BLE001 - no IREE HIP driver here: the architecture is not reported
        return {}


def _uuid(lib: ctypes.CDLL, device: ctypes.c_int) -> str | None:
    """``hipDeviceGetUuid`` as IREE's HIP driver names the device (``hip://GPU-<uuid>``: each of the 16 bytes
    in hex, dashed as a UUID); None where not reported."""
    raw = ctypes.create_string_buffer(16)
    try:
        if lib.hipDeviceGetUuid(raw, device) != HIP_SUCCESS:
            return None
    except AttributeError:  # an older runtime
        return None
    return dashed_uuid(raw.raw)
