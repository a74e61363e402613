"""Typed errors of the IREE Lens engine.

Every problem a user can cause (a bad file, a bad program, a faulting kernel) ends in one of these,
never in a bare ``AssertionError``/``IndexError``/``struct.error``. Each says what is wrong and where.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class LensError(Exception):
    """Base class of every error the engine reports to its users."""


class FormatError(LensError):
    """A file is not what it claims to be: truncated, corrupted, or of another format.

    ``where`` names the place: a byte offset, a table path such as ``function_descriptors[3]``, or both.
    """

    def __init__(self, message: str, *, path: str | None = None, where: str | None = None):
        self.message = message
        self.path = path
        self.where = where
        parts = [message]
        if where:
            parts.append(f"at {where}")
        if path:
            parts.append(f"in {path}")
        super().__init__(" ".join(parts))

    @classmethod
    def cannot_open(cls, path: object, error: OSError) -> FormatError:
        """``cannot open PATH: <the system's reason>``, the path first as a shell says it (not "cannot open:
        No such file or directory in PATH"); ``path`` is set as on every format error."""
        e = cls(f"cannot open {path}: {error.strerror or error}")
        e.path = str(path)
        return e


class VmfbFormatError(FormatError):
    """A ``.vmfb`` module cannot be read."""


class ReplayFormatError(FormatError):
    """An IREE HAL replay (``.ireereplay``) cannot be read: damaged, truncated or of another version."""


class CompileError(LensError):
    """IREE's compiler rejected a program; ``diagnostics`` holds its messages."""

    def __init__(self, message: str, diagnostics: list | None = None):
        super().__init__(message)
        self.diagnostics = list(diagnostics or [])


class ExecutableFormatError(FormatError):
    """An executable embedded in a module (a ``VKE1`` Vulkan executable, an ELF library, ...) cannot be read."""


class HalError(LensError):
    """The emulated HAL or one of its devices failed: a bad argument, a device error, a faulting dispatch."""


class VulkanError(HalError):
    """A Vulkan call failed; ``result`` is the ``VkResult`` name when Vulkan returned one."""

    def __init__(self, message: str, result: str | None = None):
        self.result = result
        super().__init__(f"{message} ({result})" if result else message)


class VulkanUnavailableError(VulkanError):
    """There is no usable Vulkan: no loader library, no driver (ICD), or no device."""


class GpuDriverError(HalError):
    """A GPU driver API call failed; ``result`` is the driver's name for its error when it returned one."""

    def __init__(self, message: str, result: str | None = None):
        self.result = result
        super().__init__(f"{message} ({result})" if result else message)


class CudaError(GpuDriverError):
    """A CUDA driver call failed; ``result`` is the ``CUresult`` name when the driver returned one."""


class CudaUnavailableError(CudaError):
    """There is no usable CUDA: no driver library (libcuda.so.1), no device, or no such device."""


class HipError(GpuDriverError):
    """A HIP runtime call failed; ``result`` is the ``hipError_t`` name when the runtime returned one."""


class HipUnavailableError(HipError):
    """There is no usable HIP: no runtime library (libamdhip64.so), no device, or no such device."""


class CompileCancelled(LensError):
    """A compile job was cancelled (or ran past its time limit) and its compiler process was stopped."""


class ExecutableLoadError(HalError):
    """A CPU executable library cannot be loaded: not an x86-64 ELF, no query symbol, wrong ABI version, ..."""


class DispatchError(HalError):
    """A dispatch function returned non-zero for a workgroup (IREE treats it as a lost device)."""

    def __init__(self, executable: str, export: str, workgroup: tuple[int, int, int], code: int):
        self.executable = executable
        self.export = export
        self.workgroup = workgroup
        self.code = code
        super().__init__(f"dispatch {export!r} of executable {executable!r} failed in workgroup {workgroup} (returned {code})")


# ------------------------------------------------------------------------------------------- the VM


class StatusCode(IntEnum):
    """IREE status codes (``iree/base/status.h``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
    DEFERRED = 17
    INCOMPATIBLE = 18


class VmStatusError(LensError):
    """An operation failed with an IREE status, e.g. ``VmStatusError(StatusCode.OUT_OF_RANGE, "...")``."""

    def __init__(self, code: StatusCode | int, message: str):
        self.code = StatusCode(int(code) & 0x1F)
        self.message = message
        super().__init__(f"{self.code.name}; {message}")


@dataclass(frozen=True)
class FrameLocation:
    """Where a VM frame is: a function of a module (by name and ordinal) and a pc. Plain data here, at the
    ground, so that a trap can carry its stack without this module importing the VM."""

    module: str
    function: str
    ordinal: int
    pc: int

    def __str__(self) -> str:
        return f"@{self.module}.{self.function}+{self.pc:#06x}"


class VmTrap(VmStatusError):
    """The VM stopped with an IREE status: code, message, the VM call stack and the failing instruction."""

    def __init__(
        self,
        code: StatusCode | int,
        message: str,
        stack: tuple[FrameLocation, ...] = (),
        instruction: Any = None,  # the decoded instruction (engine.runtime.vmfb.decoder.Instruction), if any
        instruction_text: str = "",
    ):
        super().__init__(code, message)
        self.stack = stack
        self.instruction = instruction
        self.instruction_text = instruction_text

    @property
    def status_text(self) -> str:
        """IREE's status text: ``PERMISSION_DENIED; message``."""
        return f"{self.code.name}; {self.message}"

    def describe(self) -> str:
        lines = [self.status_text]
        if self.instruction_text:
            lines.append(f"  at: {self.instruction_text}")
        for loc in reversed(self.stack):
            lines.append(f"  {loc}")
        return "\n".join(lines)


class DebugRunError(LensError):
    """The debug run failed: a VM trap (with IREE's status and the VM stack) or a HAL/link error."""

    def __init__(self, message: str, status: str | None = None):
        super().__init__(message)
        self.status = status
