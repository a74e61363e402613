"""The VM state as plain, comparable data: what "the same state" means for time travel.

``describe_state`` lists the frames (function, pc, both register banks), the module instances' globals
(``rwdata`` bytes and global refs), and every ref reachable from them *by what it holds*: a buffer view
by shape, element type and its buffer; a buffer by its range and the bytes there (read through the
allocation, so a Vulkan buffer is read back from the device); a ``vm.buffer`` by its bytes; a list by
its element type and items; a fence by its semaphores' values. Two runs are in the same state when their
descriptions are equal, whatever the identities of the Python objects.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.runtime.hal.buffers import HalBuffer, HalBufferView
from engine.runtime.hal.commands import HalCommandBuffer
from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.hal.sync import HalFence, HalSemaphore
from engine.runtime.vm.context import ModuleInstance
from engine.runtime.vm.interpreter import Interpreter
from engine.runtime.vm.values import VmBuffer, VmList, ref_type_name


def _digest(data: Any) -> str:
    return hashlib.sha1(memoryview(data).cast("B")).hexdigest()


def describe_ref(ref: Any, memo: dict[int, Any] | None = None) -> Any:
    """A ref's contents as plain data (recursive; shared refs are described once per call, cycles cut)."""
    memo = {} if memo is None else memo
    if ref is None or isinstance(ref, int | float | str):
        return ref
    key = id(ref)
    if key in memo:
        return memo[key]
    memo[key] = ("<cycle>", ref_type_name(ref))
    if isinstance(ref, HalBufferView):
        out: Any = ("hal.buffer_view", ref.shape, ref.element_type, ref.encoding_type, describe_ref(ref.buffer, memo))
    elif isinstance(ref, HalBuffer):
        a = ref.allocation
        out = (
            "hal.buffer",
            ref.byte_offset,
            ref.byte_length,
            a.size,
            _digest(ref.read_view(0, ref.byte_length)),
            _digest(a.read_view(0, a.size)),
        )
    elif isinstance(ref, VmBuffer):
        out = ("vm.buffer", ref.mutable, ref.length, _digest(ref.data))
    elif isinstance(ref, VmList):
        out = ("vm.list", ref.element_type, tuple(describe_ref(v, memo) for v in ref.items))
    elif isinstance(ref, HalFence):
        out = ("hal.fence", tuple((s.value, v) for s, v in ref.timepoints))
    elif isinstance(ref, HalSemaphore):
        out = ("hal.semaphore", ref.value)
    elif isinstance(ref, HalCommandBuffer):
        out = ("hal.command_buffer", ref.mode, ref.finalized, len(ref.commands), ref.submissions)
    elif isinstance(ref, HalExecutable):
        out = ("hal.executable", ref.label, ref.export_names)
    elif isinstance(ref, Device):
        out = ("hal.device", ref.name)
    elif isinstance(ref, tuple | list):
        out = tuple(describe_ref(v, memo) for v in ref)
    else:
        out = (ref_type_name(ref),)
    memo[key] = out
    return out


def describe_state(interpreter: Interpreter, instances: list[ModuleInstance], devices: list[Device] = ()) -> dict:
    """Frames, registers, globals, lists and buffer contents, as comparable plain data."""
    memo: dict[int, Any] = {}
    frames = [
        {
            "module": f.instance.name,
            "function": f.function_name,
            "pc": f.pc,
            "i": list(f.i),
            "r": [describe_ref(v, memo) for v in f.r],
        }
        for f in interpreter.frames[interpreter.base :]
    ]
    globals_ = {
        inst.name: {"rwdata": bytes(inst.rwdata).hex(), "refs": [describe_ref(v, memo) for v in inst.global_refs]}
        for inst in instances
    }
    return {
        "frames": frames,
        "globals": globals_,
        "results": describe_ref(interpreter.results, memo) if interpreter.results is not None else None,
        "dispatches": [d.dispatch_count for d in devices],
    }
