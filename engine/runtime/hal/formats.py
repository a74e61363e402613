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

# A static-library build's executables: only their names are in the module, their code in an object file
# (engine.runtime.hal.static_libraries).
STATIC_LIBRARY = "static"

NATIVE_CPU_FORMATS = (EMBEDDED_ELF_X86_64, SYSTEM_ELF_X86_64)
CPU_FORMATS = (*NATIVE_CPU_FORMATS, VMVX_BYTECODE)
VULKAN_FORMATS = ("vulkan-spirv-fb", "vulkan-spirv-bda-v1")
CUDA_FORMATS = ("cuda-nvptx-fb",)
HIP_FORMATS = ("rocm-hsaco-fb",)


def is_native_cpu(executable_format: str | None) -> bool:
    """Whether ``executable_format`` is an llvm-cpu library (embedded or system ELF) for this host."""
    return executable_format in NATIVE_CPU_FORMATS


def runs_natively(executable_format: str | None) -> bool:
    """Whether a loaded executable of ``executable_format`` is a native library on the CPU device: an llvm-cpu
    ELF, or a static library loaded from its object (whose module holds only its name, not its bytes)."""
    return is_native_cpu(executable_format) or executable_format == STATIC_LIBRARY


def is_cpu_elf(executable_format: str | None) -> bool:
    """Whether ``executable_format`` is an llvm-cpu ELF library for any machine (``embedded-elf-arm_64``,
    ``system-elf-riscv_64``...): what a reader may take apart even where it cannot run."""
    return bool(executable_format) and executable_format.startswith(("embedded-elf-", "system-elf-"))


def host_elf_machine() -> str:
    """This machine as IREE's CPU formats name machines (``x86_64``, ``arm_64``, ``riscv_64``)."""
    import platform

    machine = platform.machine().lower()
    return {"amd64": "x86_64", "aarch64": "arm_64", "arm64": "arm_64", "riscv64": "riscv_64"}.get(machine, machine)


def foreign_cpu_problem(formats) -> str | None:
    """What to say of a module whose CPU libraries are all for another machine than this one (built with
    ``--iree-llvmcpu-target-triple``): no device here runs them, and IREE's runtime says only "HAL device not
    found" with the whole target attribute. None when a CPU library is for this machine or there are none."""
    elf = sorted({f for f in formats if is_cpu_elf(f)})
    host = host_elf_machine()
    if not elf or any(f.endswith("-" + host) for f in elf):
        return None
    machines = sorted({f.split("-", 2)[2] for f in elf})
    return (
        f"its CPU executables ({', '.join(elf)}) are for {' and '.join(machines)} machines and this one is {host}: "
        "no device here runs them (build it for this CPU: leave --iree-llvmcpu-target-triple out)"
    )
