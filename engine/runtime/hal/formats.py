"""Executable formats, as IREE names them in a ``.vmfb`` (the string ``hal.executable.create`` is given).

One place says which formats are native CPU libraries. llvm-cpu writes ``embedded-elf-x86_64`` by default
and ``system-elf-x86_64`` with ``--iree-llvmcpu-link-embedded=false`` (what IREE's docs give for ``perf``,
gdb and sanitizers: a plain shared object linked by the system linker). Both are x86-64 ELF shared objects
exporting ``iree_hal_executable_library_query`` with the same executable library ABI, so the CPU device
loads both with the system's loader and dispatches them alike.
"""

from __future__ import annotations

EMBEDDED_ELF_X86_64 = "embedded-elf-x86_64"
SYSTEM_ELF_X86_64 = "system-elf-x86_64"
VMVX_BYTECODE = "vmvx-bytecode-fb"

NATIVE_CPU_FORMATS = (EMBEDDED_ELF_X86_64, SYSTEM_ELF_X86_64)
CPU_FORMATS = (*NATIVE_CPU_FORMATS, VMVX_BYTECODE)
VULKAN_FORMATS = ("vulkan-spirv-fb", "vulkan-spirv-bda-v1")
CUDA_FORMATS = ("cuda-nvptx-fb",)
HIP_FORMATS = ("rocm-hsaco-fb",)


def is_native_cpu(executable_format: str | None) -> bool:
    """Whether ``executable_format`` is an llvm-cpu library (embedded or system ELF) for this host."""
    return executable_format in NATIVE_CPU_FORMATS


def is_cpu_elf(executable_format: str | None) -> bool:
    """Whether ``executable_format`` is an llvm-cpu ELF library for any machine (``embedded-elf-arm_64``,
    ``system-elf-riscv_64``...): what a reader may take apart even where it cannot run."""
    return bool(executable_format) and executable_format.startswith(("embedded-elf-", "system-elf-"))
