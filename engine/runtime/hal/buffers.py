"""HAL memory as the VM sees it: allocations, buffers (zero-copy subspans), buffer views, allocators, files.

Storage design: every allocation has **host memory**, a 1-D ``uint8`` numpy array (``Allocation.data``). The
HAL's host-side operations (fill, copy, update, ``buffer.load/store``, reading a buffer view) reach it only
through ``Allocation.read_view``/``write_view``. A device whose memory lives elsewhere (Vulkan) subclasses
``Allocation``: it keeps its device copy in ``device_state`` and overrides the two views to download before a
host read and to mark the device copy stale after a host write, and uploads/downloads around its own work.
The CPU device uses the host array directly, so a kernel writes straight into it, with no copy.

Buffers alias an allocation (``byte_offset``/``byte_length``); ``subspan`` follows ``iree_hal_buffer_subspan``:
a subspan of a subspan refers to the allocated buffer directly. Range errors carry IREE's own status texts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from engine.runtime import element_types as et
from engine.runtime.hal import constants as c
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import KeepsNothing

if TYPE_CHECKING:
    from engine.runtime.hal.device import Device
    from engine.runtime.vm.values import KeepBytes


class Allocation:
    """One block of memory that buffers alias. ``owners`` is IREE's async-allocation owner count."""

    def __init__(self, data: np.ndarray, device: Device | None = None, origin: str = ""):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise ValueError("an allocation's host memory is a 1-D uint8 array")
        self.data = data
        self.device = device
        self.origin = origin  # "alloca", "allocate", "import rodata 3", "numpy"...
        self.owners = 1
        self.device_state: Any = None  # for devices that mirror the memory elsewhere
        # The VM's own buffer ops may write these bytes: the memory is also a ``!vm.buffer``'s (an import of
        # a mutable one, the inline HAL's storage). Otherwise only hal calls (dispatches, transfers) can.
        self.vm_writable = False
        self._address: int | None = None

    @property
    def size(self) -> int:
        return int(self.data.shape[0])

    @property
    def address(self) -> int:
        """The host address of the first byte (its memory never moves: a restore writes into it)."""
        found = self._address
        if found is None:
            found = self._address = int(self.data.ctypes.data)
        return found

    def read_view(self, offset: int, length: int) -> np.ndarray:
        """Bytes ``[offset, offset + length)`` for reading on the host (zero-copy here)."""
        return self.data[offset : offset + length]

    def write_view(self, offset: int, length: int) -> np.ndarray:
        """Bytes ``[offset, offset + length)`` for writing on the host (zero-copy here)."""
        return self.data[offset : offset + length]

    # -- checkpoints (``engine.runtime.vm.values.Checkpointable``)

    def checkpoint(self, keep: KeepBytes) -> tuple[int, np.ndarray | None]:
        """The owner count and the bytes (read back first from a device that mirrors them; memory imported
        read-only, e.g. rodata, is not state)."""
        view = self.read_view(0, self.size)
        return self.owners, keep(self.data) if view.flags.writeable else None

    def restore_checkpoint(self, state: tuple[int, np.ndarray | None]) -> None:
        self.owners, saved = state
        if saved is not None:
            self.write_view(0, self.size)[:] = saved  # a mirrored allocation marks its device copy stale

    def checkpoint_refs(self) -> tuple:
        return (self.device,) if self.device is not None else ()


class MirroredAllocation(Allocation):
    """Host memory with a copy in a device's own memory (Vulkan, CUDA); ``host_newer``/``device_newer`` say
    which side holds the latest bytes. A device subclass says how the host side is made current
    (``sync_host``: copy back what the device wrote, or wait for work that still reads the bytes)."""

    def __init__(self, data: np.ndarray, device: Device, origin: str):
        super().__init__(data, device, origin)
        self.host_newer = True
        self.device_newer = False

    def sync_host(self) -> None:
        """Make the host bytes current before the host reads or writes them."""
        raise NotImplementedError

    def read_view(self, offset: int, length: int) -> np.ndarray:
        self.sync_host()
        return self.data[offset : offset + length]

    def write_view(self, offset: int, length: int) -> np.ndarray:
        self.sync_host()
        self.host_newer = True
        return self.data[offset : offset + length]

    def restore_checkpoint(self, state: tuple[int, np.ndarray | None]) -> None:
        if state[1] is not None:
            self.device_newer = False  # the restored bytes replace the device's: no read-back first
        super().restore_checkpoint(state)  # writes through write_view: the device copy is now stale


MirroredT = TypeVar("MirroredT", bound=MirroredAllocation)


def owned_allocation(device: Device, buffer: HalBuffer, kind: type[MirroredT]) -> MirroredT:
    """The allocation of a dispatch binding's ``buffer``, which must be ``device``'s own memory."""
    allocation = buffer.allocation
    if not isinstance(allocation, kind) or allocation.device is not device:
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT, f"binding buffer {buffer!r} does not belong to {device.name}"
        )
    return allocation


def calculate_range(base_offset: int, max_length: int, offset: int, length: int) -> tuple[int, int]:
    """``iree_hal_buffer_calculate_range``: (absolute offset, length) of ``[offset, +length)`` in a range."""
    if offset > max_length or offset < 0:
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            "attempted to access an address off the end of the valid buffer range "
            f"(offset={offset}, length={length}, buffer byte_length={max_length})",
        )
    adjusted_length = max_length - offset if length == c.WHOLE_BUFFER else length
    if adjusted_length == 0:
        return base_offset + offset, 0
    end = offset + adjusted_length - 1
    if adjusted_length < 0 or end >= max_length:
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            "attempted to access an address outside of the valid buffer range "
            f"(offset={offset}, adjusted_length={adjusted_length}, end={end}, buffer byte_length={max_length})",
        )
    return base_offset + offset, adjusted_length


def allocation_span(buffer: object, offset: int, length: int) -> tuple[object, int, int]:
    """(allocation, start, end): where ``length`` bytes at ``offset`` of ``buffer`` lie in its allocation (a
    buffer-like object without one stands for itself), so ranges of different buffers can be compared.
    A whole-buffer ``length`` (``-1``) is resolved to the end of a buffer whose length is known."""
    allocation = getattr(buffer, "allocation", buffer)
    start = int(getattr(buffer, "byte_offset", 0)) + int(offset)
    length = int(length)
    if length == c.WHOLE_BUFFER:
        byte_length = getattr(buffer, "byte_length", None)
        length = max(int(byte_length) - int(offset), 0) if byte_length is not None else 0
    return allocation, start, start + length


class HalBuffer:
    """A ``!hal.buffer``: ``[byte_offset, +byte_length)`` of an allocation, with its memory type and usage."""

    vm_type_name = "hal.buffer"

    def __init__(
        self,
        allocation: Allocation,
        byte_offset: int,
        byte_length: int,
        memory_type: int,
        allowed_usage: int,
        allowed_access: int = c.MEMORY_ACCESS_ALL,
        parent: HalBuffer | None = None,
    ):
        self.allocation = allocation
        self.byte_offset = byte_offset
        self.byte_length = byte_length
        self.memory_type = memory_type & 0xFFFFFFFF
        self.allowed_usage = allowed_usage & 0xFFFFFFFF
        self.allowed_access = allowed_access
        self._parent = parent

    @property
    def allocated_buffer(self) -> HalBuffer:
        return self._parent if self._parent is not None else self

    @property
    def device(self) -> Device | None:
        return self.allocation.device

    def subspan(self, offset: int, length: int) -> HalBuffer:
        """``iree_hal_buffer_subspan``; the whole range returns ``self``."""
        offset, length = calculate_range(self.byte_offset, self.byte_length, offset, length)
        if offset == self.byte_offset and length == self.byte_length:
            return self
        # Subspans always refer to the allocated buffer (no nesting), like IREE.
        return HalBuffer(
            self.allocation,
            offset,
            length,
            self.memory_type,
            self.allowed_usage,
            self.allowed_access,
            parent=self.allocated_buffer,
        )

    def resolve(self, offset: int, length: int) -> tuple[int, int]:
        """Allocation offset and length of ``[offset, +length)`` of this buffer (``-1`` = to the end)."""
        return calculate_range(self.byte_offset, self.byte_length, offset, length)

    def read_view(self, offset: int = 0, length: int = c.WHOLE_BUFFER) -> np.ndarray:
        start, n = self.resolve(offset, length)
        return self.allocation.read_view(start, n)

    def write_view(self, offset: int = 0, length: int = c.WHOLE_BUFFER) -> np.ndarray:
        start, n = self.resolve(offset, length)
        return self.allocation.write_view(start, n)

    # -- checkpoints: a buffer's range never changes; its bytes are its allocation's

    def checkpoint(self, keep: KeepBytes) -> None:
        return None

    def restore_checkpoint(self, state: None) -> None:
        pass

    def checkpoint_refs(self) -> tuple:
        return (self.allocation,) if self._parent is None else (self.allocation, self._parent)

    def __repr__(self) -> str:
        return (
            f"HalBuffer({self.byte_length} bytes at +{self.byte_offset} of {self.allocation.size}, "
            f"{c.format_memory_type(self.memory_type)}, {self.allocation.origin})"
        )


class HalBufferView:
    """A ``!hal.buffer_view``: a buffer with a shape, an IREE element type code and an encoding."""

    vm_type_name = "hal.buffer_view"

    def __init__(
        self,
        buffer: HalBuffer,
        shape: tuple[int, ...],
        element_type: int,
        encoding_type: int = c.ENCODING_TYPE_DENSE_ROW_MAJOR,
    ):
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.element_type = element_type & 0xFFFFFFFF
        self.encoding_type = encoding_type & 0xFFFFFFFF

    @property
    def element(self) -> et.ElementType:
        return et.ElementType(self.element_type)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element_count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def byte_length(self) -> int:
        """Bytes the dense contents occupy (``iree_hal_buffer_view_byte_length``)."""
        if self.element.packed:
            return self.element.packed_byte_count(self.element_count)
        return self.element_count * self.element.byte_size

    def to_numpy(self, *, writable: bool = False) -> np.ndarray:
        """The contents as an array of the element type's dtype and this shape, a view of the buffer's memory.

        Types numpy lacks (bf16, f8...) come as unsigned integers of the same width (their raw bits).
        ``writable=True`` gives a view for writing (on devices that mirror memory, marks the device copy stale).
        """
        if self.element.packed:  # i4, ui2...: numpy has no such dtype; the values one a byte, read only
            if writable:
                raise VmStatusError(StatusCode.UNIMPLEMENTED,
                                    f"buffer view {self.describe()}: packed sub-byte elements cannot be written in place")  # fmt: skip
            if self.byte_length > self.buffer.byte_length:
                raise VmStatusError(
                    StatusCode.OUT_OF_RANGE,
                    f"buffer view {self.describe()} needs {self.byte_length} bytes; its buffer has {self.buffer.byte_length}",
                )
            return et.unpack(self.buffer.read_view(0, self.byte_length), self.element, self.shape)
        dtype = self.element.dtype
        nbytes = self.element_count * dtype.itemsize
        if nbytes > self.buffer.byte_length:
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE,
                f"buffer view {self.describe()} needs {nbytes} bytes; its buffer has {self.buffer.byte_length}",
            )
        raw = self.buffer.write_view(0, nbytes) if writable else self.buffer.read_view(0, nbytes)
        return raw.view(dtype).reshape(self.shape)

    def describe(self) -> str:
        return c.format_shape_and_type(self.shape, self.element.name)

    def checkpoint(self, keep: KeepBytes) -> None:
        return None  # shape and type never change; the bytes are the buffer's

    def restore_checkpoint(self, state: None) -> None:
        pass

    def checkpoint_refs(self) -> tuple:
        return (self.buffer,)

    def __repr__(self) -> str:
        return f"HalBufferView({self.describe()})"


class HalAllocator:
    """A ``!hal.allocator``: allocates and imports buffers for its device."""

    vm_type_name = "hal.allocator"

    def __init__(self, device: Device):
        self.device = device

    def allocate(self, memory_type: int, usage: int, size: int, origin: str = "allocate") -> HalBuffer:
        if size < 0:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT, f"failed to allocate buffer of length {size}; negative size"
            )
        memory_type, usage = self.device.buffer_params(memory_type, usage)
        allocation = self.device.new_allocation(size, origin)
        self.device.allocation_made(allocation)
        return HalBuffer(allocation, 0, size, memory_type, usage)

    def wrap(
        self, data: np.ndarray, memory_type: int, usage: int, access: int, origin: str
    ) -> HalBuffer | None:
        """Alias existing host memory (``allocator.import``); ``None`` if this device cannot (then callers copy)."""
        memory_type, usage = self.device.buffer_params(memory_type, usage)
        allocation = self.device.import_allocation(data, origin)
        if allocation is None:
            return None
        self.device.allocation_made(allocation)
        return HalBuffer(allocation, 0, allocation.size, memory_type, usage, access)

    def checkpoint(self, keep: KeepBytes) -> None:
        return None

    def restore_checkpoint(self, state: None) -> None:
        pass

    def checkpoint_refs(self) -> tuple:
        return (self.device,)

    def __repr__(self) -> str:
        return f"HalAllocator({self.device.name})"


class HalFile(KeepsNothing):
    """A ``!hal.file``: a host memory range (from ``ex.file.from_memory``) that queue reads copy from."""

    # KeepsNothing: only read from (queue reads; ex.file.from_memory makes read-only files, so writes refuse).
    vm_type_name = "hal.file"

    def __init__(self, data: np.ndarray, access: int, origin: str = ""):
        self.data = data
        self.access = access
        self.origin = origin

    @property
    def length(self) -> int:
        return int(self.data.shape[0])

    def __repr__(self) -> str:
        return f"HalFile({self.length} bytes, {self.origin})"
