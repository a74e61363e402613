"""The emulated HAL's device factory: an IREE device URI (``--device=``) to a ``Device``.

``local-sync``, ``local-task`` and ``local`` give the CPU device (our HAL runs queue work synchronously,
so the task executor's device is the same thing here). ``vulkan``, ``vulkan://N`` (an index into
``list_physical_devices()``) and ``vulkan://NAME`` (a case-insensitive substring of a device name) give
the Vulkan device. Without Vulkan, the ``vulkan`` URIs raise ``VulkanUnavailableError`` whose message
names the packages to install; the CPU URIs never touch Vulkan. ``cuda`` and ``cuda://N`` name NVIDIA
devices (``CudaHalDevice``, through ``libcuda``, loaded only then); without a driver they raise
``CudaUnavailableError`` whose message is one sentence (``cuda.driver.NO_DRIVER``). ``hip`` and ``hip://N``
name AMD devices the same way (``HipHalDevice``, through ``libamdhip64``; ``hip.driver.NO_RUNTIME`` without
ROCm). A GPU is also named as IREE names it (``cuda://GPU-<uuid>``) or by a part of its name.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field

from engine.errors import HalError
from engine.runtime.hal.device import Device
from engine.runtime.hal.formats import CPU_FORMATS, CUDA_FORMATS, HIP_FORMATS, STATIC_LIBRARY, VULKAN_FORMATS

CPU_DRIVERS = ("local-sync", "local-task", "local")
VULKAN_DRIVER = "vulkan"
CUDA_DRIVER = "cuda"
HIP_DRIVER = "hip"


def split_device_uri(uri: str) -> tuple[str, str]:
    """``(driver, rest)`` of an IREE device URI: ``vulkan://1`` → ``("vulkan", "1")``, ``vulkan`` → ``("vulkan", "")``."""
    driver, sep, rest = uri.strip().partition("://")
    if not sep:
        driver, _, rest = driver.partition(":")
    return driver, rest


def vulkan_selector(rest: str) -> int | str | None:
    """What ``VulkanDevice`` takes for the part of a ``vulkan://`` URI after the scheme."""
    if not rest:
        return None
    return int(rest) if rest.isdigit() else rest


def create_device(uri: str) -> Device:
    """The emulated HAL device for ``uri``; ``HalError`` for an unknown driver."""
    driver, rest = split_device_uri(uri)
    if driver in CPU_DRIVERS:
        from engine.runtime.hal.cpu_device import CpuDevice

        return CpuDevice()
    if driver == VULKAN_DRIVER:
        from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

        return VulkanHalDevice(vulkan_selector(rest))
    if driver == CUDA_DRIVER:
        from engine.runtime.hal.cuda_hal_device import CudaHalDevice

        return CudaHalDevice(cuda_index(rest))  # CudaUnavailableError (one sentence) without a driver
    if driver == HIP_DRIVER:
        from engine.runtime.hal.hip_hal_device import HipHalDevice

        return HipHalDevice(hip_index(rest))  # HipUnavailableError (one sentence) without ROCm
    known = ", ".join(
        [*CPU_DRIVERS, VULKAN_DRIVER, "vulkan://N", "vulkan://NAME", CUDA_DRIVER, "cuda://N", "cuda://NAME",
         HIP_DRIVER, "hip://N", "hip://NAME"]
    )  # fmt: skip
    raise HalError(f"device {uri!r} is not available in the debug engine; known devices: {known}")


def cuda_index(rest: str) -> int:
    """The device index a ``cuda`` URI names: ``cuda`` (the first), ``cuda://N``, ``cuda://GPU-<uuid>`` (as
    IREE's CUDA driver and ``nvidia-smi -L`` name a device) or ``cuda://NAME`` (a part of the device's name,
    any case: ``cuda://h200``). ``HalError`` naming the devices when none or several match; without a
    driver, its one sentence."""
    from engine.runtime.hal.cuda.driver import list_cuda_devices

    return _gpu_index(rest, list_cuda_devices, CUDA_DRIVER, "CUDA")


def hip_index(rest: str) -> int:
    """The device index a ``hip`` URI names, as ``cuda_index`` reads a ``cuda`` one."""
    from engine.runtime.hal.hip.driver import list_hip_devices

    return _gpu_index(rest, list_hip_devices, HIP_DRIVER, "HIP")


def _gpu_index(rest: str, list_devices, scheme: str, vendor: str) -> int:
    if not rest:
        return 0
    if rest.isdigit():
        return int(rest)
    devices = list_devices()
    wanted = rest.lower()
    if wanted.startswith("gpu-"):
        hits = [d for d in devices if d.uuid is not None and d.uuid.lower() == wanted]
    else:
        hits = [d for d in devices if wanted in d.name.lower()]
    if len(hits) == 1:
        return hits[0].index
    listing = "; ".join(f"{scheme}://{d.index} {d.name} ({d.uuid or 'no UUID'})" for d in devices) or "none"
    if hits:
        raise HalError(f"{scheme}://{rest} matches {len(hits)} {vendor} devices; name one by its index: {listing}")
    raise HalError(f"no {vendor} device matches {scheme}://{rest}; this machine has: {listing}")


def iree_device_uri(uri: str) -> str:
    """``uri`` as IREE's runtime takes it: a CUDA or HIP device named by a part of its name (``cuda://h200``,
    IREE Lens's own form) becomes that device's ``cuda://GPU-<uuid>``; IREE's drivers take only an index or a
    UUID. Other URIs are IREE's already."""
    driver, rest = split_device_uri(uri)
    if driver not in (CUDA_DRIVER, HIP_DRIVER) or not rest or rest.isdigit() or rest.lower().startswith("gpu-"):
        return uri
    if driver == CUDA_DRIVER:
        from engine.runtime.hal.cuda.driver import list_cuda_devices as list_devices

        index = cuda_index(rest)
    else:
        from engine.runtime.hal.hip.driver import list_hip_devices as list_devices

        index = hip_index(rest)
    device = list_devices()[index]
    return f"{driver}://{device.uuid}" if device.uuid else f"{driver}://{index}"


def device_uris() -> list[str]:
    """The device URIs a user can pick here: ``local-sync`` and one ``vulkan://N`` per Vulkan device."""
    from engine.runtime.hal.vulkan.loader import list_physical_devices

    uris = ["local-sync"]
    try:
        uris += [f"vulkan://{info.index}" for info in list_physical_devices()]
    except HalError:
        pass  # no Vulkan: the CPU alone
    return uris + [choice.uri for choice in cuda_choices() + hip_choices()]


# The iree-compile target that produces each kind of device's executable formats (engine.runtime.hal.formats).
CPU_TARGET = "llvm-cpu"
VULKAN_TARGET = "vulkan-spirv"
CUDA_TARGET = "cuda"
HIP_TARGET = "rocm"


@dataclass(frozen=True)
class DeviceChoice:
    """A device a user can run on: its URI, a name to show, the formats it runs, its compile target and
    its properties as (label, text) rows."""

    uri: str
    name: str
    kind: str  # "cpu", "vulkan", "cuda" or "hip"
    formats: tuple[str, ...]
    compile_target: str
    properties: list[tuple[str, str]] = field(default_factory=list)


def cpu_choice() -> DeviceChoice:
    """The CPU device (``local-sync``), always available."""
    return DeviceChoice(
        "local-sync",
        "local-sync — CPU",
        "cpu",
        CPU_FORMATS,
        CPU_TARGET,
        [
            ("Name", "local-sync (the emulated HAL's CPU device)"),
            ("Type", "cpu"),
            ("URI", "local-sync"),
            ("Executable formats", ", ".join(CPU_FORMATS)),
            ("Host", f"{platform.machine()} {platform.system()}, {os.cpu_count()} logical cores"),
        ],
    )


def list_devices() -> tuple[list[DeviceChoice], str | None]:
    """Every device a run can use (the CPU first, then each Vulkan device) and, when Vulkan is not
    available, why (``None`` when it is). Creating a Vulkan instance can take a moment: call it off the
    GUI thread."""
    from engine.runtime.hal.vulkan.loader import list_physical_devices

    choices = [cpu_choice()]
    try:
        infos = list_physical_devices()
    except HalError as e:
        return choices + cuda_choices() + hip_choices(), str(e)  # a GPU's own driver needs no Vulkan
    for info in infos:
        uri = f"vulkan://{info.index}"
        choices.append(
            DeviceChoice(uri, f"{uri} — {info.name}", "vulkan", VULKAN_FORMATS, VULKAN_TARGET, vulkan_device_properties(info))
        )
    return choices + cuda_choices() + hip_choices(), None


def cuda_choices() -> list[DeviceChoice]:
    """One choice per CUDA device the driver reports; none without a driver (``cuda_absence`` says why)."""
    from engine.runtime.hal.cuda.driver import list_cuda_devices

    try:
        infos = list_cuda_devices()
    except HalError:
        return []
    return [
        DeviceChoice(
            f"cuda://{info.index}",
            f"cuda://{info.index} — {info.name}",
            "cuda",
            CUDA_FORMATS,
            cuda_compile_target(info),
            cuda_device_properties(info),
        )
        for info in infos
    ]


def hip_choices() -> list[DeviceChoice]:
    """One choice per HIP device the runtime reports; none without ROCm (``hip_absence`` says why)."""
    from engine.runtime.hal.hip.driver import list_hip_devices

    try:
        infos = list_hip_devices()
    except HalError:
        return []
    return [
        DeviceChoice(
            f"hip://{i.index}", f"hip://{i.index} — {i.name}", "hip", HIP_FORMATS, hip_compile_target(i),
            hip_device_properties(i),
        )
        for i in infos
    ]


def hip_absence() -> str | None:
    """Why no HIP device is listed (no runtime, no device), or None when the runtime reports devices."""
    from engine.runtime.hal.hip.driver import list_hip_devices

    try:
        return None if list_hip_devices() else "the HIP runtime reports no device"
    except HalError as e:
        return str(e)


def hip_device_properties(info) -> list[tuple[str, str]]:
    """A ``HipDeviceInfo`` as (label, text) rows."""
    return [
        ("Name", info.name),
        ("Type", "hip"),
        ("URI", f"hip://{info.index}"),
        ("UUID", info.uuid or "not reported"),
        ("Architecture", info.arch or "not reported by IREE's HIP driver"),
        ("Memory", _bytes_text(info.total_memory)),
        ("Executable formats", ", ".join(HIP_FORMATS)),
    ]


def cuda_absence() -> str | None:
    """Why no CUDA device is listed (no driver, no device), or None when the driver reports devices."""
    from engine.runtime.hal.cuda.driver import list_cuda_devices

    try:
        return None if list_cuda_devices() else "the CUDA driver reports no device"
    except HalError as e:
        return str(e)


def cuda_device_properties(info) -> list[tuple[str, str]]:
    """A ``CudaDeviceInfo`` as (label, text) rows: name, compute capability, memory."""
    major, minor = info.compute_capability
    return [
        ("Name", info.name),
        ("Type", "cuda"),
        ("URI", f"cuda://{info.index}"),
        ("UUID", info.uuid or "not reported"),
        ("Compute capability", f"{major}.{minor} ({info.sm})"),
        ("Memory", _bytes_text(info.total_memory)),
        ("Multiprocessors", str(info.multiprocessors)),
        ("Executable formats", ", ".join(CUDA_FORMATS)),
    ]


def device_kind(uri: str) -> str | None:
    """``cpu``, ``vulkan``, ``cuda``, ``hip``, or ``None`` for a URI the debug engine does not know."""
    driver, _ = split_device_uri(uri)
    if driver in CPU_DRIVERS:
        return "cpu"
    if driver == VULKAN_DRIVER:
        return "vulkan"
    if driver == CUDA_DRIVER:
        return "cuda"
    if driver == HIP_DRIVER:
        return "hip"
    return None


def compile_target_for(uri: str) -> str:
    """The iree-compile target whose executables ``uri``'s device runs (``llvm-cpu``, ``vulkan-spirv``, ``cuda``,
    ``rocm``); for a CUDA device the driver reports, its own architecture (``cuda_compile_target``)."""
    kind = device_kind(uri)
    if kind == "cuda":
        from engine.runtime.hal.cuda.driver import list_cuda_devices

        try:
            index = cuda_index(split_device_uri(uri)[1])
            return cuda_compile_target(list_cuda_devices()[index])
        except (HalError, IndexError):
            return CUDA_TARGET  # no driver, no such device: IREE Lens's default (sm_80)
    if kind == "hip":
        from engine.runtime.hal.hip.driver import list_hip_devices

        try:
            return hip_compile_target(list_hip_devices()[hip_index(split_device_uri(uri)[1])])
        except (HalError, IndexError):
            return HIP_TARGET  # no runtime, no such device: IREE Lens's default (gfx942)
    return {"vulkan": VULKAN_TARGET}.get(kind or "", CPU_TARGET)


def cuda_compile_target(info) -> str:
    """``cuda`` (sm_80) for a device of compute capability 8.0 or one newer than iree-compile 3.13 knows (the
    driver compiles sm_80 PTX for it), else ``cuda:sm_XY``, the device's own: sm_80 code does not load on an
    older GPU (a T4 is sm_75, a V100 sm_70)."""
    from engine.compiler.targets import IREE_CUDA_ARCHITECTURES

    if info.sm == "sm_80" or info.sm not in IREE_CUDA_ARCHITECTURES:
        return CUDA_TARGET
    return f"{CUDA_TARGET}:{info.sm}"


def hip_compile_target(info) -> str:
    """``rocm`` (gfx942) for a device whose architecture IREE's driver did not report or iree-compile 3.13 does
    not build for, else ``rocm:gfxNNN``, the device's own: a code object loads only on the target it was built
    for."""
    from engine.compiler.targets import IREE_ROCM_ARCHITECTURES

    if info.arch is None or info.arch == "gfx942" or info.arch not in IREE_ROCM_ARCHITECTURES:
        return HIP_TARGET
    return f"{HIP_TARGET}:{info.arch}"


def vulkan_subgroup_size(uri: str) -> tuple[int, str]:
    """The subgroup size and name of the Vulkan device ``uri`` names (``vulkan``, ``vulkan://N``, by name);
    ``(0, "")`` where it is not a Vulkan URI, there is no such device, or it does not report its subgroup."""
    from engine.runtime.hal.vulkan.loader import list_physical_devices

    scheme, rest = split_device_uri(uri)
    if scheme != "vulkan":
        return 0, ""
    try:
        devices = list_physical_devices()
    except HalError:
        return 0, ""
    selector = vulkan_selector(rest)
    for info in devices:
        if selector is None and info.index == 0 or selector in (info.index, info.name):
            return int(info.subgroup_size or 0), info.name
    return 0, ""


def formats_kind(formats: set[str] | list[str] | tuple[str, ...]) -> str | None:
    """The kind of device a module's executable formats need (``cpu``/``vulkan``/``cuda``/``hip``), ``None``
    when it has no executables or formats of several kinds or of none."""
    kinds = {next((kind for kind, known in _FORMATS.items() if f in known), "other") for f in formats}
    return next(iter(kinds)) if len(kinds) == 1 and "other" not in kinds else None


def runs_formats(uri: str, formats: set[str] | list[str] | tuple[str, ...]) -> bool:
    """Whether ``uri``'s device runs every executable format in ``formats``."""
    kind = device_kind(uri)
    supported = _FORMATS.get(kind or "", ())
    return all(f in supported for f in formats)


# The CPU device runs a static-library build too, its kernels loaded from the object the build wrote.
_FORMATS = {"cpu": (*CPU_FORMATS, STATIC_LIBRARY), "vulkan": VULKAN_FORMATS, "cuda": CUDA_FORMATS, "hip": HIP_FORMATS}


def _bytes_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % (size // 16) == 0:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def vulkan_device_properties(info) -> list[tuple[str, str]]:
    """The main properties and compute limits of a ``PhysicalDeviceInfo`` as (label, text) rows."""
    xyz = "x".join
    rows = [
        ("Name", info.name),
        ("Type", info.device_type),
        ("URI", f"vulkan://{info.index}"),
        ("Vulkan API", info.api_version),
        ("Vendor / device id", f"{info.vendor_id:#06x} / {info.device_id:#06x}"),
        ("Driver version", str(info.driver_version)),
        ("Subgroup size", str(info.subgroup_size) if info.subgroup_size else "not reported"),
        ("Max workgroup count", xyz(str(v) for v in info.max_compute_workgroup_count)),
        ("Max workgroup size", xyz(str(v) for v in info.max_compute_workgroup_size)),
        ("Max workgroup invocations", str(info.max_compute_workgroup_invocations)),
        ("Max shared memory", _bytes_text(info.max_compute_shared_memory_size)),
        ("Max push constants", _bytes_text(info.max_push_constants_size)),
        ("Max storage buffer range", _bytes_text(info.max_storage_buffer_range)),
        ("Max bound descriptor sets", str(info.max_bound_descriptor_sets)),
        ("Max storage buffers per stage", str(info.max_per_stage_descriptor_storage_buffers)),
        ("Min storage buffer offset alignment", str(info.min_storage_buffer_offset_alignment)),
        ("Timestamp period", f"{info.timestamp_period_ns:g} ns"),
    ]
    for i, heap in enumerate(info.memory_heaps):
        rows.append(
            (f"Memory heap {i}", _bytes_text(heap.size) + (" (device local)" if heap.device_local else ""))
        )
    for i, mt in enumerate(info.memory_types):
        rows.append((f"Memory type {i}", f"heap {mt.heap_index}: {' | '.join(mt.flag_names) or 'none'}"))
    rows.append(("Extensions", str(len(info.extensions))))
    return rows


__all__ = [
    "iree_device_uri",
    "CPU_DRIVERS",
    "CPU_FORMATS",
    "CPU_TARGET",
    "CUDA_DRIVER",
    "CUDA_FORMATS",
    "CUDA_TARGET",
    "HIP_DRIVER",
    "HIP_FORMATS",
    "HIP_TARGET",
    "hip_absence",
    "hip_choices",
    "hip_device_properties",
    "hip_index",
    "cuda_absence",
    "cuda_choices",
    "cuda_compile_target",
    "cuda_device_properties",
    "cuda_index",
    "VULKAN_FORMATS",
    "VULKAN_TARGET",
    "DeviceChoice",
    "compile_target_for",
    "cpu_choice",
    "device_kind",
    "formats_kind",
    "list_devices",
    "runs_formats",
    "VULKAN_DRIVER",
    "create_device",
    "device_uris",
    "split_device_uri",
    "vulkan_device_properties",
    "vulkan_selector",
]
