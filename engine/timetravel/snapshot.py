"""Exact in-memory checkpoints of a paused VM: frames, registers, globals, lists and buffer bytes.

A ``Snapshot`` is taken at an instruction boundary of the top-level invocation (no native call running).
It is composed of what the objects themselves offer, never read by reflection:

* the interpreter's call stack (``Interpreter.checkpoint``: frames, registers, where results go);
* each module instance's globals (``ModuleInstance.checkpoint_globals``);
* every ref reachable from the registers, the globals and the results, and from those refs in turn
  (``checkpoint_refs``: a list's items, a buffer view's buffer, a buffer's allocation, a fence's semaphores,
  a command buffer's buffers...), each saving its own state (``checkpoint``: an allocation's bytes, read
  back first from a device that mirrors them; a list's items; a semaphore's value; a device's dispatch
  counter and pending queue). Every ref class of the VM and the HAL offers these
  (``engine.runtime.vm.values.Checkpointable``); a ref that does not is refused with a ``TypeError``
  rather than silently left out of the checkpoint.

``restore_snapshot`` puts all of it back *in place* (``restore_checkpoint``): the same Python objects (ref
identity survives, so a register that held a buffer holds that buffer again) with the state and bytes they
had. Objects created after the snapshot become unreachable. Native handles (loaded ELF libraries, Vulkan
devices and pipelines, executables) are shared, never copied: they do not change while a program runs.

Byte copies are shared with the previous snapshot when the bytes did not change (``ArrayStore``), so a
long run with large, mostly constant buffers costs one copy of them plus what changed.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.runtime.hal.device import Device
from engine.runtime.vm.context import ModuleInstance
from engine.runtime.vm.interpreter import Interpreter, InterpreterState

_SCALARS = (int, float, str, bytes, bool, complex, type(None))
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
class Snapshot:
    """The state at one position of the recorded call (see the module docstring). ``nbytes`` estimates
    the memory this snapshot added (shared byte copies counted once, by the snapshot that made them)."""

    position: int
    dispatches: int
    interpreter: InterpreterState
    instances: list[tuple[ModuleInstance, tuple[bytes, tuple]]]
    objects: list[tuple[Any, Any]]  # (ref, what its ``checkpoint`` returned), in the order they were reached
    nbytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _reachable_states(roots: list[Any], store: ArrayStore) -> list[tuple[Any, Any]]:
    """Each ref reachable from ``roots`` once, with its checkpoint state."""
    seen: set[int] = set()
    out: list[tuple[Any, Any]] = []
    todo = list(roots)
    while todo:
        obj = todo.pop()
        if isinstance(obj, _SCALARS):
            continue
        key = id(obj)
        if key in seen:
            continue
        seen.add(key)
        if isinstance(obj, list | tuple):  # a register bank, a global ref table, the results
            todo.extend(obj)
            continue
        checkpoint = getattr(obj, "checkpoint", None)
        if checkpoint is None:
            raise TypeError(f"a {type(obj).__name__} cannot be checkpointed (it offers no checkpoint())")
        out.append((obj, checkpoint(store.copy_of)))
        todo.extend(obj.checkpoint_refs())
    return out


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
    state = interpreter.checkpoint()
    saved_instances = [(inst, inst.checkpoint_globals()) for inst in instances]
    roots: list[Any] = [list(devices)]
    roots.extend(inst.global_refs for inst in instances)
    roots.append(interpreter.results)
    roots.extend(f.r for f in state.frames)
    objects = _reachable_states(roots, store)
    dispatches = devices[0].dispatch_count if devices else 0
    nbytes = store.new_bytes + sum(64 + 8 * len(s) if isinstance(s, tuple) else 64 for _, s in objects)
    nbytes += sum(8 * (len(s.i) + len(s.r)) + 96 for s in state.frames)
    nbytes += sum(len(rw) + 8 * len(refs) for _, (rw, refs) in saved_instances)
    return Snapshot(position, dispatches, state, saved_instances, objects, nbytes)


def restore_snapshot(snapshot: Snapshot, interpreter: Interpreter) -> None:
    """Put the recorded state back in place (same objects, their recorded state and bytes)."""
    for obj, state in snapshot.objects:
        obj.restore_checkpoint(state)
    for inst, globals_ in snapshot.instances:
        inst.restore_globals(globals_)
    interpreter.restore_checkpoint(snapshot.interpreter)
