"""Which workgroup of a dispatch wrote a given element: the module's own kernel runs again on copies of the
dispatch's inputs one workgroup at a time, with the element's bytes first set to something else than what the
dispatch left there; the first workgroup that changes them wrote it."""

from __future__ import annotations

import numpy as np

from engine.kernel.dispatch_run import CapturedDispatch, KernelStepError


def _workgroups(count: tuple[int, int, int]):
    cx, cy, cz = count
    for z in range(cz):  # local-sync's order
        for y in range(cy):
            for x in range(cx):
                yield x, y, z


def workgroup_that_wrote(
    captured: CapturedDispatch, data: bytes, binding: int, offset: int, size: int
) -> tuple[int, int, int] | None:
    """The workgroup whose run writes bytes ``[offset, offset + size)`` of ``binding`` (``data``: the
    executable's bytes), or None when no workgroup writes them."""
    if not 0 <= binding < len(captured.before) or not 0 <= offset < offset + size <= captured.before[binding].size:
        raise KernelStepError(f"binding {binding} has no bytes [{offset}, {offset + size})")
    final = captured.after[binding][offset : offset + size]
    sentinel = (final ^ 0xA5).astype(np.uint8)  # differs from the final bytes in every byte
    if captured.executable_format == "vmvx-bytecode-fb":
        return _vmvx(captured, data, binding, offset, sentinel)
    return _elf(captured, data, binding, offset, sentinel)


def _elf(captured, data, binding, offset, sentinel):
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary, aligned_copy

    bindings = [aligned_copy(b) for b in captured.before]
    bindings[binding][offset : offset + sentinel.size] = sentinel
    library = CpuExecutableLibrary.load(data, "writer search")
    try:
        prepared = library.prepare_dispatch(captured.export_name, captured.workgroup_count, captured.constants, bindings)
        for wg in _workgroups(captured.workgroup_count):
            prepared.run_workgroup(*wg)
            if not np.array_equal(bindings[binding][offset : offset + sentinel.size], sentinel):
                return wg
    finally:
        library.close()
    return None


def _vmvx(captured, data, binding, offset, sentinel):
    from engine.runtime.vm.values import VmBuffer, VmList
    from engine.runtime.vm.vmvx import VmvxExecutable

    executable = VmvxExecutable.load(data)
    export = executable.exports[captured.export_ordinal]
    arrays = [np.array(b, dtype=np.uint8, copy=True) for b in captured.before]
    arrays[binding][offset : offset + sentinel.size] = sentinel
    buffers = VmList("!vm.buffer", [VmBuffer(a, True, f"binding {k}") for k, a in enumerate(arrays)])
    constants = np.asarray([int(c) & 0xFFFFFFFF for c in captured.constants], dtype=np.uint32).view(np.uint8)
    cx, cy, cz = captured.workgroup_count
    for x, y, z in _workgroups(captured.workgroup_count):
        args = [VmBuffer.allocate(export.attributes.local_memory, "local memory"),
                VmBuffer(constants, False, "dispatch constants"), buffers, x, y, z, 1, 1, 1, cx, cy, cz]  # fmt: skip
        executable.context.invoke_instance(executable.instance, export.function_ordinal, args)
        if not np.array_equal(arrays[binding][offset : offset + sentinel.size], sentinel):
            return x, y, z
    return None
