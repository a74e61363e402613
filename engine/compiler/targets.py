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


def target_flags(target: str) -> list[str]:
    """The ``iree-compile`` flags for ``target`` (one of ``TARGETS``)."""
    try:
        return list(TARGETS[target].flags)
    except KeyError:
        raise ValueError(f"unknown target {target!r}; known targets: {', '.join(TARGETS)}") from None
