"""What "when did this change?" watches: a register, a global, or an element of a HAL buffer.

A watch reads its value from the live VM at any instruction boundary; the time-travel engine replays
the run and reports the last instruction (and dispatch) after which the value differed.

HAL buffers are named by their allocation's *serial*: the engine numbers allocations in the order the
device creates them, which replay reproduces, so a buffer is found again at any earlier moment even
when replay rebuilt it as a new Python object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.runtime.hal.buffers import Allocation, HalBuffer, HalBufferView
from engine.runtime.vm.context import ModuleInstance
from engine.runtime.vm.interpreter import Interpreter

ABSENT = ("<absent>",)  # the value of a watch whose frame or buffer does not exist at that moment


@dataclass(frozen=True)
class RegisterWatch:
    """Register ``index`` of bank ``bank`` ("i" or "r") in the frame at ``depth`` (0 = the call's entry
    frame). Refs compare by identity (a write stores another object or null)."""

    depth: int
    bank: str
    index: int

    def describe(self) -> str:
        return f"frame {self.depth} %{self.bank}{self.index}"


@dataclass(frozen=True)
class GlobalWatch:
    """``length`` bytes at ``offset`` of a module's primitive globals (``rwdata``), or, with ``ref=True``,
    global ref ``offset``."""

    module: str
    offset: int
    length: int = 4
    ref: bool = False

    def describe(self) -> str:
        what = f"global ref {self.offset}" if self.ref else f"rwdata[{self.offset}:{self.offset + self.length}]"
        return f"@{self.module} {what}"


@dataclass(frozen=True)
class BufferWatch:
    """``length`` bytes at ``offset`` of the allocation numbered ``serial`` (see the module docstring)."""

    serial: int
    offset: int
    length: int

    def describe(self) -> str:
        return f"allocation #{self.serial} bytes [{self.offset}, {self.offset + self.length})"


Watch = RegisterWatch | GlobalWatch | BufferWatch


@dataclass(frozen=True)
class Write:
    """A device operation that wrote a watched range, run by the instruction at ``position``: a
    ``dispatch`` (its run ordinal, ``export`` its name) or a transfer (``fill``, ``update``, or ``copy``
    from ``source``)."""

    kind: str
    position: int
    dispatch: int | None = None
    export: str = ""
    source: BufferWatch | None = None

    def describe(self, dispatch_base: int = 0, here: int | None = None) -> str:
        """In words; dispatches numbered from ``dispatch_base``, and the instruction said when not ``here``."""
        if self.kind == "dispatch":
            text = f"dispatch #{(self.dispatch or 0) - dispatch_base}" + (f" {self.export}" if self.export else "")
        elif self.kind == "copy" and self.source is not None:
            text = f"a copy from {self.source.describe()}"
        else:
            text = {"fill": "a fill", "update": "an update from the host"}.get(self.kind, self.kind)
        return text if here is None or self.position == here else f"{text} (instr. {self.position:,})"


@dataclass(frozen=True)
class Change:
    """The last change of a watched value before a position: the instruction at ``position`` (``function``
    and ``pc`` say where it was) changed it from ``before`` to ``after``; ``dispatch`` is the ordinal of
    the dispatch that wrote it when a dispatch did. ``via``: for a buffer's bytes, the device operations
    that put them there, the one that wrote them first, then, while that one was a copy, the one that
    wrote the copy's source (ending at a dispatch, a fill, an update, or a source whose history is not
    recorded). ``allocated_at``: the buffer's ``before`` bytes were as the instruction there allocated them
    (unchanged since; IREE leaves new memory undefined, whatever this engine's HAL put there)."""

    watch: Watch
    position: int
    module: str
    function: str
    pc: int
    before: Any
    after: Any
    dispatch: int | None = None
    via: tuple[Write, ...] = ()
    allocated_at: int | None = None


class RefValue:
    """A ref as a watched value: equal only to the same object (a store of another object is a change)."""

    __slots__ = ("ref",)

    def __init__(self, ref: Any):
        self.ref = ref

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RefValue) and other.ref is self.ref

    def __hash__(self) -> int:
        return id(self.ref)

    def __repr__(self) -> str:
        return "null" if self.ref is None else repr(self.ref)


def serial_of(allocation: Allocation) -> int | None:
    return getattr(allocation, "lens_serial", None)


def watch_element(ref: Any, element: int) -> BufferWatch:
    """A watch on element ``element`` (flat index) of a buffer view, or byte ``element`` of a buffer."""
    if isinstance(ref, HalBufferView):
        size = ref.element.byte_size or 1
        return watch_bytes(ref.buffer, element * size, size)
    if isinstance(ref, HalBuffer):
        return watch_bytes(ref, element, 1)
    raise TypeError(f"cannot watch an element of {type(ref).__name__}; a hal.buffer_view or hal.buffer")


def watch_buffer(ref: Any) -> BufferWatch:
    """A watch on all the bytes of a ``hal.buffer`` (or a buffer view's buffer): what a buffer global holds."""
    buffer = ref.buffer if isinstance(ref, HalBufferView) else ref
    if not isinstance(buffer, HalBuffer):
        raise TypeError(f"{type(ref).__name__} is not a hal.buffer or hal.buffer_view")
    return watch_bytes(buffer, 0, buffer.byte_length)


def watch_bytes(buffer: HalBuffer, offset: int, length: int) -> BufferWatch:
    """A watch on ``length`` bytes at ``offset`` of ``buffer`` (``ValueError`` outside it, or for a buffer made
    before time travel numbered allocations)."""
    serial = serial_of(buffer.allocation)
    if serial is None:
        raise ValueError("this buffer was not created under time travel; its history is unknown")
    if not (0 <= offset and 0 < length and offset + length <= buffer.byte_length):
        raise ValueError(f"bytes [{offset}, {offset + length}) are not in its {buffer.byte_length}")
    start, _ = buffer.resolve(offset, length)
    return BufferWatch(serial, start, length)


def read_watch(
    watch: Watch, interpreter: Interpreter, instances: list[ModuleInstance], allocations: dict[int, Allocation]
) -> Any:
    """The watched value now (``ABSENT`` when its frame or buffer does not exist)."""
    if isinstance(watch, RegisterWatch):
        k = interpreter.base + watch.depth
        if k >= len(interpreter.frames):
            return ABSENT
        bank = interpreter.frames[k].i if watch.bank == "i" else interpreter.frames[k].r
        if watch.index >= len(bank):
            return ABSENT
        v = bank[watch.index]
        return v if watch.bank == "i" else RefValue(v)
    if isinstance(watch, GlobalWatch):
        for inst in instances:
            if inst.name == watch.module:
                if watch.ref:
                    return RefValue(inst.global_refs[watch.offset])
                return bytes(inst.rwdata[watch.offset : watch.offset + watch.length])
        return ABSENT
    a = allocations.get(watch.serial)
    if a is None:
        return ABSENT
    return bytes(a.read_view(watch.offset, watch.length))
