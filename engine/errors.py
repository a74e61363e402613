"""Typed errors of the IREE Lens engine.

Every problem a user can cause (a bad file, a bad program, a faulting kernel) ends in one of these,
never in a bare ``AssertionError``/``IndexError``/``struct.error``. Each says what is wrong and where.
"""

from __future__ import annotations


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


class VmfbFormatError(FormatError):
    """A ``.vmfb`` module cannot be read."""


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
