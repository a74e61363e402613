"""IREE's CUDA kernel arguments, as its stream command buffer packs them for ``cuLaunchKernel``.

IREE 3.13's ``iree_hal_cuda_stream_command_buffer_dispatch`` passes ``binding_count + constant_count``
kernel parameters: first one ``CUdeviceptr`` per binding (the buffer's device pointer plus the buffer's
own byte offset plus the binding's offset; 0 for an absent buffer), then one parameter per 32-bit
constant. Each parameter lives in an 8-byte payload slot and ``kernelParams[i]`` points at slot ``i``; a
constant is written into the low 4 bytes of its slot (this module zeroes the other 4, IREE leaves arena
bytes there that the kernel never reads). The block size is the export's ``block_dims`` unless the
dispatch names its own workgroup size, and ``block_shared_memory_size`` bytes of dynamic shared memory.

Pure functions of plain numbers: tested here without a GPU against that layout.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import HalError
from engine.runtime.vmfb.cda1 import CudaExportDef

SLOT_BYTES = 8  # sizeof(CUdeviceptr) on a 64-bit host: each parameter's payload slot


@dataclass(frozen=True)
class BindingAddress:
    """Where a binding points: ``base`` is the allocation's device pointer (0: no buffer bound)."""

    base: int
    buffer_offset: int = 0  # the HAL buffer's offset into its allocation (a subspan buffer)
    offset: int = 0  # the binding's own offset

    @property
    def device_pointer(self) -> int:
        return self.base + self.buffer_offset + self.offset if self.base else 0


@dataclass(frozen=True)
class LaunchShape:
    """The grid and block of one ``cuLaunchKernel``."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_memory_bytes: int


def kernel_payload(export: CudaExportDef, bindings: Sequence[BindingAddress], constants: Sequence[int]) -> np.ndarray:
    """The 8-byte payload slots of one dispatch's parameters: bindings' device pointers, then constants.

    ``HalError`` when the dispatch gives another number of bindings or constants than the export takes
    (IREE's validation refuses such a dispatch before it reaches the driver).
    """
    if len(bindings) != export.binding_count:
        raise HalError(
            f"kernel {export.kernel_name} takes {export.binding_count} bindings, the dispatch gives {len(bindings)}"
        )
    if len(constants) != export.constant_count:
        raise HalError(
            f"kernel {export.kernel_name} takes {export.constant_count} constants, the dispatch gives {len(constants)}"
        )
    payload = np.zeros(export.binding_count + export.constant_count, dtype="<u8")
    for i, b in enumerate(bindings):
        payload[i] = b.device_pointer
    for i, c in enumerate(constants):
        payload[export.binding_count + i] = int(c) & 0xFFFFFFFF  # low 4 bytes of the slot, little-endian
    return payload


def kernel_params(payload: np.ndarray) -> ctypes.Array:
    """``kernelParams`` for ``cuLaunchKernel``: one pointer per payload slot. ``payload`` must outlive the
    launch call (the driver copies the values when it is called)."""
    base = payload.ctypes.data
    params = (ctypes.c_void_p * len(payload))()
    for i in range(len(payload)):
        params[i] = base + i * SLOT_BYTES
    return params


def launch_shape(
    export: CudaExportDef, workgroup_count: Sequence[int], workgroup_size: Sequence[int] = (0, 0, 0)
) -> LaunchShape:
    """Grid = the dispatch's workgroup count; block = its workgroup size where given, else the export's."""
    block = tuple(int(s) if s else int(d) for s, d in zip(workgroup_size, export.block_dims, strict=True))
    grid = tuple(int(c) for c in workgroup_count)
    if len(grid) != 3:
        raise HalError(f"a workgroup count has 3 dimensions, not {len(grid)}")
    return LaunchShape(grid, block, export.block_shared_memory_size)  # type: ignore[arg-type]
