"""Exact in-memory checkpoints of a paused VM: frames, registers, globals, lists and buffer bytes.

A ``Snapshot`` is taken at an instruction boundary of the top-level invocation (no native call running).
It records, for every object reachable from the interpreter's frames, the module instances' globals and
the devices:

* interpreter frames (pc, both register banks, where results go) and the interpreter's own fields;
* module instances' ``rwdata`` bytes and global refs;
* every ref object's attributes, shallowly (lists, dicts and sets copied one level), walking on through
  them: lists' items, buffer views' buffers, buffers' allocations, fences' semaphores, command buffers'
  commands...;
* the bytes of every writable numpy array held by such an object (an allocation's memory, a
  ``vm.buffer``'s bytes); devices that mirror memory (Vulkan) are read back first;
* each device's dispatch counter and pending queue (never its native handles or observers).

``restore()`` puts all of it back *in place*: the same Python objects (ref identity survives, so a
register that held a buffer holds that buffer again) with the attributes and bytes they had. Objects
created after the snapshot become unreachable. Native handles (loaded ELF libraries, Vulkan devices and
pipelines, executables) are shared, never copied: they do not change while a program runs.

Byte copies are shared with the previous snapshot when the bytes did not change (``ArrayStore``), so a
long run with large, mostly constant buffers costs one copy of them plus what changed.
"""

from __future__ import annotations

import functools
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.runtime.hal.buffers import Allocation, HalFile
from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.vm.context import ModuleInstance, VmContext
from engine.runtime.vm.interpreter import Frame, Interpreter
from engine.runtime.vm.native import NativeModule
from engine.runtime.vm.values import VmBuffer
from engine.runtime.vmfb.module import VmfbModule

_SCALARS = (int, float, str, bytes, bool, complex, type(None))
# Objects never walked into: immutable after creation or native (their state is not the program's).
_OPAQUE = (HalExecutable, VmfbModule, Interpreter, ModuleInstance, VmContext, type)
_CODE = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)
# Attributes kept as they are but not walked into: observers, and a device's native copy of memory.
_NOT_STATE = frozenset({"observers", "device_state"})
_SMALL = 4096  # arrays up to this many bytes are copied, not compared with the previous copy


class ArrayStore:
    """Byte copies shared across snapshots: an array whose bytes equal its last copy reuses that copy."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[weakref.ref, np.ndarray]] = {}
        self.new_bytes = 0  # bytes copied since the counter was last reset

    def copy_of(self, array: np.ndarray) -> np.ndarray:
        key = id(array)
        last = self._last.get(key)
        if last is not None and last[0]() is array and array.nbytes > _SMALL and np.array_equal(last[1], array):
            return last[1]
        saved = array.copy()
        saved.flags.writeable = False
        self.new_bytes += saved.nbytes
        try:
            self._last[key] = (weakref.ref(array), saved)
        except TypeError:  # arrays without weakref support are simply not shared
            pass
        return saved

    def forget_dead(self) -> None:
        for key in [k for k, (ref, _) in self._last.items() if ref() is None]:
            del self._last[key]


@dataclass
class _FrameState:
    frame: Frame
    pc: int
    i: list
    r: list
    ret_regs: tuple
    ret_kinds: tuple


@dataclass
class Snapshot:
    """The state at one position of the recorded call (see the module docstring). ``nbytes`` estimates
    the memory this snapshot added (shared byte copies counted once, by the snapshot that made them)."""

    position: int
    dispatches: int
    frames: list[_FrameState]
    interpreter: dict[str, Any]
    instances: list[tuple[ModuleInstance, bytes, list]]
    objects: list[tuple[Any, dict[str, Any]]]
    arrays: list[tuple[Any, str, np.ndarray]]
    devices: list[tuple[Device, tuple]]  # (device, Device.queue_state())
    nbytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class _Walker:
    def __init__(self, store: ArrayStore):
        self.store = store
        self.seen: set[int] = set()
        self.objects: list[tuple[Any, dict[str, Any]]] = []
        self.arrays: list[tuple[Any, str, np.ndarray]] = []
        self.devices: list[tuple[Device, tuple]] = []
        self.overhead = 0
        self._todo: list[Any] = []

    def add(self, obj: Any) -> None:
        self._todo.append(obj)

    def run(self) -> None:
        todo = self._todo
        while todo:
            self._visit(todo.pop())

    def _visit(self, obj: Any) -> None:
        if isinstance(obj, _SCALARS + _CODE):
            return
        key = id(obj)
        if key in self.seen:
            return
        self.seen.add(key)
        if isinstance(obj, list | tuple | set | frozenset):
            self._todo.extend(obj)
            return
        if isinstance(obj, dict):
            self._todo.extend(obj.values())
            return
        if isinstance(obj, (np.ndarray, NativeModule, *_OPAQUE)):
            # Native modules keep devices and callbacks; the program's state is in the refs they hand out.
            return
        if isinstance(obj, Device):
            self.devices.append((obj, obj.queue_state()))
            return
        attrs = _attributes(obj)
        if attrs is None:
            return
        if isinstance(obj, Allocation):
            obj.read_view(0, obj.size)  # a mirrored allocation downloads its device copy first
        # The VM cannot store into a read-only vm.buffer (rodata): its bytes are not state. (Memory that a
        # kernel writes through an allocation imported from rodata is copied with that allocation.)
        # Files (``ex.file.from_memory``) are only read from, by queue reads.
        frozen = isinstance(obj, VmBuffer) and not obj.mutable or isinstance(obj, HalFile)
        saved: dict[str, Any] = {}
        for name, value in attrs.items():
            if isinstance(value, np.ndarray):
                saved[name] = value
                if value.flags.writeable and not frozen:
                    self.arrays.append((obj, name, self.store.copy_of(value)))
                continue
            if isinstance(value, list):
                saved[name] = list(value)
                self.overhead += 8 * len(value)
            elif isinstance(value, dict):
                saved[name] = dict(value)
                self.overhead += 16 * len(value)
            elif isinstance(value, set):
                saved[name] = set(value)
            else:
                saved[name] = value
            if name not in _NOT_STATE:
                self._todo.append(value)
        self.objects.append((obj, saved))
        self.overhead += 64 + 16 * len(saved)


def _attributes(obj: Any) -> dict[str, Any] | None:
    d = getattr(obj, "__dict__", None)
    if d is not None:
        return dict(d)
    slots = [s for cls in type(obj).__mro__ for s in getattr(cls, "__slots__", ())]
    if not slots:
        return None
    return {s: getattr(obj, s) for s in slots if hasattr(obj, s)}


def take_snapshot(
    interpreter: Interpreter,
    instances: list[ModuleInstance],
    devices: list[Device],
    position: int,
    store: ArrayStore,
) -> Snapshot:
    """Record the state (see the module docstring); the interpreter must be between instructions."""
    if interpreter.native_depth:
        raise RuntimeError("a snapshot needs the VM between instructions (a native call is running)")
    store.new_bytes = 0
    walker = _Walker(store)
    frames = []
    for f in interpreter.frames:
        frames.append(_FrameState(f, f.pc, list(f.i), list(f.r), f.ret_regs, f.ret_kinds))
        walker.add(f.r)
    state = {
        "base": interpreter.base,
        "results": interpreter.results,
        "trap": interpreter.trap,
        "last_import": interpreter.last_import,
        "entry_kinds": interpreter.entry_kinds,
    }
    walker.add(interpreter.results)
    saved_instances = []
    for inst in instances:
        saved_instances.append((inst, bytes(inst.rwdata), list(inst.global_refs)))
        walker.add(inst.global_refs)
    for device in devices:
        walker.add(device)
    walker.run()
    dispatches = devices[0].dispatch_count if devices else 0
    nbytes = store.new_bytes + walker.overhead
    nbytes += sum(8 * (len(s.i) + len(s.r)) + 96 for s in frames)
    nbytes += sum(len(rw) + 8 * len(refs) for _, rw, refs in saved_instances)
    return Snapshot(
        position,
        dispatches,
        frames,
        state,
        saved_instances,
        walker.objects,
        walker.arrays,
        walker.devices,
        nbytes,
    )


def restore_snapshot(snapshot: Snapshot, interpreter: Interpreter) -> None:
    """Put the recorded state back in place (same objects, recorded attributes and bytes)."""
    for obj, saved in snapshot.objects:
        for name, value in saved.items():
            if isinstance(value, list):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            elif isinstance(value, set):
                value = set(value)
            object.__setattr__(obj, name, value)
    for obj, name, saved in snapshot.arrays:
        target = getattr(obj, name)
        if isinstance(obj, Allocation):
            obj.write_view(0, obj.size)[:] = saved  # a mirrored allocation marks its device copy stale
        else:
            target[...] = saved
    for device, queue_state in snapshot.devices:
        device.restore_queue_state(queue_state)
    for inst, rwdata, refs in snapshot.instances:
        inst.rwdata[:] = rwdata
        inst.global_refs[:] = refs
    frames = []
    for s in snapshot.frames:
        f = s.frame
        f.pc = s.pc
        f.i[:] = s.i
        f.r[:] = s.r
        f.ret_regs, f.ret_kinds = s.ret_regs, s.ret_kinds
        frames.append(f)
    interpreter.frames[:] = frames
    for name, value in snapshot.interpreter.items():
        setattr(interpreter, name, value)
    interpreter.native_depth = 0
