"""``iree-lens devices``: the devices a run can use here, ours (the debug engine's) and IREE's drivers."""

from __future__ import annotations

import argparse

from engine.errors import HalError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("devices", help="list the Vulkan, CUDA and HIP devices and IREE's runtime drivers")
    p.add_argument("--all", action="store_true", help="every property, memory heaps and types included")
    p.set_defaults(func=run)


def _iree_drivers() -> str:
    try:
        import iree.runtime as rt

        return ", ".join(rt.query_available_drivers())
    except Exception as e:  # a broken iree.runtime install must not hide the Vulkan listing
        return f"unavailable ({e})"


def run(args: argparse.Namespace) -> int:
    from engine.runtime.hal.devices import vulkan_device_properties
    from engine.runtime.hal.vulkan.loader import list_physical_devices

    print("CPU:")
    print(
        "  local-sync (also local-task, local): the emulated HAL's CPU device, llvm-cpu and vmvx executables"
    )
    print("Vulkan:")
    try:
        devices = list_physical_devices()
    except HalError as e:
        devices = []
        print(f"  not available: {e}")
    for info in devices:
        print(f"  vulkan://{info.index}  {info.name} ({info.device_type}, Vulkan {info.api_version})")
        rows = vulkan_device_properties(info)
        if not args.all:
            rows = [r for r in rows if not r[0].startswith(("Memory type", "Vendor", "Driver", "Timestamp"))]
        width = max(len(label) for label, _ in rows)
        for label, text in rows[3:]:  # name, type and URI are on the heading line
            print(f"      {label:<{width}}  {text}")
    _print_cuda()
    _print_hip()
    print(f"IREE runtime drivers (--engine=reference): {_iree_drivers()}")
    return 0


def _print_cuda() -> None:
    """The CUDA devices (name, compute capability, memory), or one line saying why there are none."""
    from engine.runtime.hal.devices import cuda_absence, cuda_choices

    _print_gpus("CUDA", cuda_absence, cuda_choices, "compute capability {Compute capability}, {Memory}")


def _print_hip() -> None:
    """The HIP devices (name, memory, UUID), or one line saying why there are none."""
    from engine.runtime.hal.devices import hip_absence, hip_choices

    _print_gpus("HIP", hip_absence, hip_choices, "{Memory}, UUID {UUID}")


def _print_gpus(title: str, absence, choices, details: str) -> None:
    print(f"{title}:")
    why = absence()
    if why is not None:
        print(f"  not available: {why}")
        return
    for choice in choices():
        rows = dict(choice.properties)
        print(f"  {choice.uri}  {rows['Name']} ({details.format_map(rows)})")
