"""IREE's inline HAL for our VM: the ``hal_inline`` and ``hal_loader`` native modules a program compiled with
``--iree-execution-model=inline-dynamic`` imports instead of ``hal`` (IREE's ``runtime/src/iree/modules/hal/
inline`` and ``loader``, 3.13), over the CPU device, so such a build runs, stops and is inspected like any other.

The inline HAL has no queues, command buffers or fences: buffers are host memory the program reads and writes
through ``!vm.buffer`` storage views (``buffer.storage``), and ``hal_loader.executable.dispatch`` runs one
dispatch at once, its bindings given as ``!vm.buffer`` ranges. Each dispatch is run here as a one-command
command buffer executed on the device (``Device.queue_execute``), so the device's observers (dispatch
breakpoints, captures, typed tensors, time travel) see it as they see any dispatch; a binding is the HAL
buffer a storage view was made of, or the ``!vm.buffer`` (a module constant) imported in place.

Buffer views, asserts, subspans, lengths and device queries are the ``hal`` module's own (``HalModule``'s
methods, called with the device the inline module serves).
"""

from __future__ import annotations

import weakref
from typing import Any

from engine.runtime.hal import commands as cmd
from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalAllocator, HalBuffer
from engine.runtime.hal.commands import BufferRef, HalCommandBuffer
from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.hal.module import HalModule
from engine.runtime.vm.native import NativeModule, StatusCode, VmStatusError, export
from engine.runtime.vm.values import VmBuffer, ref_type_name

HAL_INLINE = "hal_inline"
HAL_LOADER = "hal_loader"
INLINE_MODULES = (HAL_INLINE, HAL_LOADER)
INLINE_EXECUTION_FLAG = "--iree-execution-model=inline-dynamic"  # the iree-compile flag of such builds

# hal_inline.buffer.allocate's buffers (runtime/src/iree/modules/hal/inline/module.c).
_MEMORY = c.MEMORY_TYPE_HOST_LOCAL | c.MEMORY_TYPE_DEVICE_VISIBLE
_USAGE = c.BUFFER_USAGE_TRANSFER | c.BUFFER_USAGE_DISPATCH_STORAGE | c.BUFFER_USAGE_MAPPING
MAX_BINDINGS = 32  # iree_hal_loader_module_executable_dispatch's limit


def _checked(value: Any, cls: type, type_name: str) -> Any:
    if not isinstance(value, cls):
        have = "null" if value is None else ref_type_name(value)
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"ref type mismatch; expected {type_name} but have {have}")
    return value


class InlineStorage:
    """What the two modules share: the ``hal`` module whose buffer-view functions they reuse (its trace sink
    gets ``buffer_view.trace``) and its device, and the HAL buffer behind each ``!vm.buffer`` a dispatch may
    bind (storage views, imported constants)."""

    def __init__(self, hal: HalModule):
        self.hal = hal
        self.device: Device = hal.devices[0]
        self.allocator = HalAllocator(self.device)
        self._buffers: weakref.WeakKeyDictionary[VmBuffer, HalBuffer] = weakref.WeakKeyDictionary()

    def allocate(self, size: int, origin: str) -> HalBuffer:
        return self.allocator.allocate(_MEMORY, _USAGE, size, origin)

    def storage(self, buffer: HalBuffer) -> VmBuffer:
        """A ``!vm.buffer`` over ``buffer``'s bytes (the same memory: what the program stores, kernels read)."""
        view = VmBuffer(buffer.write_view(0, c.WHOLE_BUFFER), True, f"storage of {buffer.allocation.origin}")
        buffer.allocation.vm_writable = True
        self._buffers[view] = buffer
        return view

    def owner(self, view: object) -> HalBuffer | None:
        """The HAL buffer ``view`` is the storage of, or None (not a storage view: nothing is made here)."""
        return self._buffers.get(view) if isinstance(view, VmBuffer) else None

    def hal_buffer(self, view: VmBuffer) -> HalBuffer:
        """The HAL buffer a binding's ``!vm.buffer`` is: the one a storage view was made of, else the view's
        memory imported in place (a module constant), or copied where the device cannot alias it."""
        found = self._buffers.get(view)
        if found is None:
            found = self.allocator.wrap(view.data, _MEMORY, _USAGE, c.MEMORY_ACCESS_ALL, f"import {view.origin}".strip())
            if found is None:
                found = self.allocate(view.length, f"copy of {view.origin}".strip())
                found.write_view()[...] = view.data
            else:
                found.allocation.vm_writable = view.mutable  # the VM's buffer ops write the view's memory
            self._buffers[view] = found
        return found


class _InlineHalModule(NativeModule):
    """One of the two modules, over the storage they share."""

    def __init__(self, shared: InlineStorage):
        super().__init__()
        self.shared = shared


class HalInlineModule(_InlineHalModule):
    """``hal_inline``: buffers as host memory with ``!vm.buffer`` storage, buffer views, device queries."""

    name = HAL_INLINE
    version = 0

    @export("buffer.allocate", "0iI_rr")
    def buffer_allocate(self, minimum_alignment, allocation_size):
        buffer = self.shared.allocate(allocation_size, "hal_inline.buffer.allocate")
        return buffer, self.shared.storage(buffer)

    @export("buffer.allocate.initialized", "0irII_rr")
    def buffer_allocate_initialized(self, minimum_alignment, source, offset, length):
        source = _checked(source, VmBuffer, "vm.buffer")
        if offset < 0 or length < 0 or offset + length > source.length:
            raise VmStatusError(StatusCode.OUT_OF_RANGE, f"source range [{offset}, +{length}) out of range of "
                                f"{source.length} bytes")  # fmt: skip
        buffer = self.shared.allocate(length, f"hal_inline.buffer.allocate.initialized {source.origin}".strip())
        buffer.write_view()[...] = source.data[offset : offset + length]
        return buffer, self.shared.storage(buffer)

    @export("buffer.wrap", "0rII_r")
    def buffer_wrap(self, source, offset, length):
        raise VmStatusError(StatusCode.UNIMPLEMENTED, "vm->hal buffer wrapping not yet implemented")  # as IREE 3.13

    @export("buffer.subspan", "0rII_r")
    def buffer_subspan(self, source_buffer, source_offset, length):
        return self.shared.hal.buffer_subspan(source_buffer, source_offset, length)

    @export("buffer.length", "0r_I")
    def buffer_length(self, buffer):
        return self.shared.hal.buffer_length(buffer)

    @export("buffer.storage", "0r_r")
    def buffer_storage(self, buffer):
        return self.shared.storage(_checked(buffer, HalBuffer, "hal.buffer"))

    @export("buffer_view.create", "0rIIiiCID_r")
    def buffer_view_create(self, buffer, source_offset, source_length, element_type, encoding_type, shape):
        return self.shared.hal.buffer_view_create(buffer, source_offset, source_length, element_type, encoding_type,
                                                  shape)  # fmt: skip

    @export("buffer_view.assert", "0rriiCID_v")
    def buffer_view_assert(self, buffer_view, message, element_type, encoding_type, shape):
        self.shared.hal.buffer_view_assert(buffer_view, message, element_type, encoding_type, shape)

    @export("buffer_view.buffer", "0r_r")
    def buffer_view_buffer(self, buffer_view):
        return self.shared.hal.buffer_view_buffer(buffer_view)

    @export("buffer_view.element_type", "0r_i")
    def buffer_view_element_type(self, buffer_view):
        return self.shared.hal.buffer_view_element_type(buffer_view)

    @export("buffer_view.encoding_type", "0r_i")
    def buffer_view_encoding_type(self, buffer_view):
        return self.shared.hal.buffer_view_encoding_type(buffer_view)

    @export("buffer_view.rank", "0r_i")
    def buffer_view_rank(self, buffer_view):
        return self.shared.hal.buffer_view_rank(buffer_view)

    @export("buffer_view.dim", "0ri_I")
    def buffer_view_dim(self, buffer_view, index):
        return self.shared.hal.buffer_view_dim(buffer_view, index)

    @export("buffer_view.trace", "0rCrD_v")
    def buffer_view_trace(self, key, operands):
        self.shared.hal.buffer_view_trace(key, operands)

    @export("device.query.i64", "0rr_iI")
    def device_query_i64(self, category, key):
        return self.shared.hal.device_query_i64(self.shared.device, category, key)


class HalLoaderModule(_InlineHalModule):
    """``hal_loader``: executables loaded on the device and dispatched at once."""

    name = HAL_LOADER
    version = 1

    @export("executable.query_support", "0r_i")
    def executable_query_support(self, executable_format):
        text = _checked(executable_format, VmBuffer, "vm.buffer").as_text()
        return 1 if self.shared.device.supports_format(text) else 0

    @export("executable.load", "0rrr_r")
    def executable_load(self, executable_format, executable_data, constants):
        try:
            return self.shared.hal.executable_create(self.shared.device, -1, executable_format, executable_data,
                                                     constants)  # fmt: skip
        except VmStatusError as e:
            if e.code == StatusCode.NOT_FOUND:  # the loader's words for a format no loader takes
                text = _checked(executable_format, VmBuffer, "vm.buffer").as_text()
                raise VmStatusError(StatusCode.NOT_FOUND, "no executable loader registered for the given "
                                    f"executable format '{text}'") from None  # fmt: skip
            raise

    @export("executable.lookup.function", "0rr_I")
    def executable_lookup_function(self, executable, function_name):
        return self.shared.hal.executable_lookup_function(executable, function_name)

    @export("executable.dispatch", "0rIiiiCiDCrIID_v")
    def executable_dispatch(self, executable, function_id, workgroup_x, workgroup_y, workgroup_z, constants,
                            bindings):  # fmt: skip
        exe = _checked(executable, HalExecutable, "hal.executable")
        if len(bindings) > MAX_BINDINGS:
            raise VmStatusError(StatusCode.RESOURCE_EXHAUSTED, "too many bindings")
        refs = []
        for buffer, offset, length in bindings:
            view = _checked(buffer, VmBuffer, "vm.buffer")
            if offset < 0 or length < 0 or offset + length > view.length:
                raise VmStatusError(StatusCode.OUT_OF_RANGE, f"binding range [{offset}, +{length}) out of range of "
                                    f"{view.length} bytes")  # fmt: skip
            refs.append(BufferRef(0, self.shared.hal_buffer(view), offset, length))
        command_buffer = HalCommandBuffer(self.shared.device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 0, -1, 0)
        count = (workgroup_x & 0xFFFFFFFF, workgroup_y & 0xFFFFFFFF, workgroup_z & 0xFFFFFFFF)
        command_buffer.record(cmd.DispatchCommand(exe, function_id, count, None,
                                                  tuple(v & 0xFFFFFFFF for v in constants), tuple(refs)))  # fmt: skip
        command_buffer.finalize()
        self.shared.device.queue_execute(command_buffer, [])


def inline_modules(hal: HalModule) -> list[NativeModule]:
    """The ``hal_inline`` and ``hal_loader`` modules over ``hal``'s device (sharing their storage views)."""
    shared = InlineStorage(hal)
    return [HalInlineModule(shared), HalLoaderModule(shared)]


def imports_inline_hal(module) -> bool:
    """Whether a ``VmfbModule`` depends on the inline HAL (an ``--iree-execution-model=inline-dynamic`` build)."""
    return any(d.name in INLINE_MODULES for d in module.dependencies)
