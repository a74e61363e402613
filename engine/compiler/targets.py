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


# A GPU target for one architecture: ``cuda:sm_75`` is ``cuda`` with ``--iree-cuda-target=sm_75`` (a device's own
# compute capability), ``rocm:gfx1100`` is ``rocm`` with ``--iree-rocm-target=gfx1100``.
ARCHITECTURE_FLAGS = {"cuda": "--iree-cuda-target", "rocm": "--iree-rocm-target"}
# The CUDA architectures iree-compile 3.13 builds for (sm_90 and later fail with "missing GPU target"; their
# GPUs run sm_80 code, whose PTX the driver compiles for them).
IREE_CUDA_ARCHITECTURES = ("sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89")
# The AMD architectures iree-compile 3.13 was seen to build for (gfx940, gfx941, gfx1030 and gfx1102 fail).
IREE_ROCM_ARCHITECTURES = (
    "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1103", "gfx1150", "gfx1151", "gfx1200", "gfx1201",
)  # fmt: skip


def find_target(target: str) -> Target:
    """The ``Target`` named ``target``, runnable (``TARGETS``) or compile-only (``COMPILE_ONLY_TARGETS``), or
    ``cuda:ARCH`` / ``rocm:ARCH`` (``ARCHITECTURE_FLAGS``)."""
    found = TARGETS.get(target) or COMPILE_ONLY_TARGETS.get(target)
    base, sep, arch = target.partition(":")
    if found is None and sep and base in ARCHITECTURE_FLAGS and arch.replace("_", "").isalnum():
        flag = ARCHITECTURE_FLAGS[base]
        plain = COMPILE_ONLY_TARGETS[base]
        flags = tuple(f for f in plain.flags if not f.startswith(flag + "=")) + (f"{flag}={arch}",)
        return Target(target, flags, plain.device)
    if found is None:
        known = ", ".join([*TARGETS, *COMPILE_ONLY_TARGETS])
        raise ValueError(f"unknown target {target!r}; known targets: {known}")
    return found


def target_flags(target: str) -> list[str]:
    """The ``iree-compile`` flags for ``target`` (one of ``TARGETS`` or ``COMPILE_ONLY_TARGETS``)."""
    return list(find_target(target).flags)
