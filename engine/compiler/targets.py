"""The compile targets IREE Lens knows, as IREE's own ``iree-compile`` flags."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One IREE target backend with the flags that select it and the runtime device that runs it."""

    name: str  # IREE's backend name: llvm-cpu, vmvx, vulkan-spirv
    flags: tuple[str, ...]
    device: str  # the iree-run-module --device that runs what it compiles


TARGETS: dict[str, Target] = {
    "llvm-cpu": Target(
        "llvm-cpu",
        (
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host",
        ),
        "local-sync",
    ),
    "vmvx": Target(
        "vmvx",
        ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx"),
        "local-sync",
    ),
    "vulkan-spirv": Target("vulkan-spirv", ("--iree-hal-target-device=vulkan",), "vulkan"),
}


# Targets IREE 3.13 compiles for but this machine cannot run (no such device): their programs can be
# inspected phase by phase, never executed. Kept apart from TARGETS, which lists what runs here.
COMPILE_ONLY_TARGETS: dict[str, Target] = {
    "cuda": Target("cuda", ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"), "cuda"),
    "rocm": Target("rocm", ("--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"), "hip"),
    "metal-spirv": Target("metal-spirv", ("--iree-hal-target-device=metal",), "metal"),
}


def find_target(target: str) -> Target:
    """The ``Target`` named ``target``, runnable (``TARGETS``) or compile-only (``COMPILE_ONLY_TARGETS``)."""
    found = TARGETS.get(target) or COMPILE_ONLY_TARGETS.get(target)
    if found is None:
        known = ", ".join([*TARGETS, *COMPILE_ONLY_TARGETS])
        raise ValueError(f"unknown target {target!r}; known targets: {known}")
    return found


def target_flags(target: str) -> list[str]:
    """The ``iree-compile`` flags for ``target`` (one of ``TARGETS`` or ``COMPILE_ONLY_TARGETS``)."""
    return list(find_target(target).flags)
