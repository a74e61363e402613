"""Commands in, events out: the plain-data protocol between a client (the window, a script) and a session.

Nothing here is a Qt object or a live native handle, so a session can run in this process, in a child
process (a crashing kernel must not take the window down), or one day on another machine. Tensors travel
as ``TensorRef``: inline numpy arrays in-process, shared-memory blocks across processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------------------------- names


class BreakpointKind(StrEnum):
    INSTRUCTION = "instruction"  # function + pc
    FUNCTION = "function"  # entry of a function
    IMPORT = "import"  # every call of an import (``hal.device.queue.execute``...)
    DISPATCH = "dispatch"  # a dispatch: by run ordinal, by IREE's name (globs), or every one ("*")
    NAN = "nan"  # after the first dispatch that writes NaN or Inf
    DIVERGE = "diverge"  # after the first dispatch whose outputs differ from a reference run (``reference``)


class StepMode(StrEnum):
    INTO = "into"
    OVER = "over"
    OUT = "out"
    DISPATCH = "dispatch"  # run to the next dispatch (stops before it)


class StopReason(StrEnum):
    ENTRY = "entry"
    STEP = "step"
    BREAKPOINT = "breakpoint"
    PAUSED = "paused"
    DISPATCH = "dispatch"  # before or after a dispatch (``Location.dispatch_info`` says which)


class DispatchWhen(StrEnum):
    BEFORE = "before"
    AFTER = "after"


# ------------------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Breakpoint:
    """Where to stop (``kind`` a ``BreakpointKind``).

    ``instruction``: ``function`` + ``pc``; ``function``: entry of ``function``; ``import``: ``import_name``;
    ``dispatch``: ``ordinal`` (the N-th dispatch of the run, from 0) or ``dispatch`` (an executable or export
    name, globs allowed; ``*`` is every dispatch), ``when`` before or after it runs; ``nan``: after the first
    dispatch that writes NaN or Inf.
    """

    kind: str
    function: str | None = None
    pc: int | None = None
    import_name: str | None = None
    module: str | None = None
    dispatch: str | None = None
    ordinal: int | None = None
    when: str = DispatchWhen.BEFORE
    # ``diverge``: the reference run (a capture bundle or a .vmfb module) and the tolerance.
    reference: str | None = None
    atol: float | None = None
    rtol: float | None = None

    def describe(self) -> str:
        """Short text for lists and stop reports (``before dispatch #1``, ``entry of main``...)."""
        if self.kind == BreakpointKind.INSTRUCTION:
            return f"{self.function} pc {self.pc:#x}" if self.pc is not None else str(self.function)
        if self.kind == BreakpointKind.FUNCTION:
            return f"entry of {self.function}"
        if self.kind == BreakpointKind.IMPORT:
            return f"call of {self.import_name}"
        if self.kind == BreakpointKind.DISPATCH:
            target = f"#{self.ordinal}" if self.ordinal is not None else (self.dispatch or "*")
            return f"{self.when} dispatch {'every one' if target == '*' else target}"
        if self.kind == BreakpointKind.NAN:
            return "after a dispatch that writes NaN/Inf"
        if self.kind == BreakpointKind.DIVERGE:
            if self.atol is None and self.rtol is None:
                return f"after a dispatch that diverges from {self.reference} (beyond rounding)"
            return f"after a dispatch that diverges from {self.reference} (atol {self.atol or 0}, rtol {self.rtol or 0})"
        return repr(self)


@dataclass(frozen=True)
class FrameInfo:
    module: str
    function: str
    pc: int
    instruction: str = ""


@dataclass(frozen=True)
class BindingInfo:
    """One binding of a dispatch: ``length`` bytes at ``offset`` of a buffer (``buffer`` names it, stable
    for the run). ``access`` is ``read``, ``write``, ``readwrite`` (known after the dispatch ran: the bytes
    it changed) or ``unknown`` (before it ran)."""

    index: int
    buffer: str
    offset: int
    length: int
    access: str = "unknown"


@dataclass(frozen=True)
class DispatchInfo:
    """A dispatch as the session reports it: ``ordinal`` counts the run's dispatches from 0."""

    ordinal: int
    executable: str
    export: str
    workgroup_count: tuple[int, int, int]
    constants: tuple[int, ...]
    bindings: tuple[BindingInfo, ...]
    when: str = DispatchWhen.BEFORE
    device: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"ordinal": self.ordinal, "name": self.export, "when": str(self.when)}


@dataclass(frozen=True)
class Location:
    """Where a run is: its call stack (innermost last) and, during a dispatch, which one."""

    frames: tuple[FrameInfo, ...] = ()
    dispatch: str | None = None
    dispatch_index: int | None = None
    dispatch_info: DispatchInfo | None = None

    def describe(self) -> str:
        parts = []
        if self.frames:
            f = self.frames[-1]
            parts.append(
                f"{f.module}.{f.function} pc {f.pc:#x}" + (f" ({f.instruction})" if f.instruction else "")
            )
        if self.dispatch:
            parts.append(f"dispatch #{self.dispatch_index} {self.dispatch}")
        return ", ".join(parts) or "not started"


@dataclass
class TensorRef:
    """A tensor crossing the protocol: an array in-process, or a shared-memory block between processes."""

    shape: tuple[int, ...]
    dtype: str
    element_type: str = ""
    array: np.ndarray | None = None
    shm_name: str | None = None

    def to_numpy(self) -> np.ndarray:
        if self.array is not None:
            return self.array
        from multiprocessing import shared_memory

        block = shared_memory.SharedMemory(name=self.shm_name)
        try:
            view = np.ndarray(self.shape, dtype=np.dtype(self.dtype), buffer=block.buf)
            self.array = np.array(view, copy=True)
            del view
        finally:
            block.close()
            block.unlink()
        self.shm_name = None
        return self.array


# -------------------------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Command:
    pass


@dataclass(frozen=True)
class Open(Command):
    module_path: str
    device: str = "local-sync"


@dataclass(frozen=True)
class Call(Command):
    """Start calling ``function`` with ``inputs`` (``--input`` strings); stop at entry when asked."""

    function: str
    inputs: tuple[str, ...] = ()
    stop_at_entry: bool = False


@dataclass(frozen=True)
class Step(Command):
    """``count`` steps of ``mode`` (a ``StepMode``); one ``Stopped`` at the end, or earlier at a breakpoint."""

    mode: str = StepMode.INTO
    count: int = 1


@dataclass(frozen=True)
class Continue(Command):
    pass


@dataclass(frozen=True)
class RunTo(Command):
    function: str
    pc: int


@dataclass(frozen=True)
class SetBreakpoints(Command):
    breakpoints: tuple[Breakpoint, ...] = ()


@dataclass(frozen=True)
class Shutdown(Command):
    pass


@dataclass(frozen=True)
class Evaluate(Command):
    """Run a named engine-side query and answer with ``Answer``.

    Queries: ``registers`` (depth=-1), ``globals``, ``frames``, ``dispatch`` (the paused dispatch's
    ``DispatchInfo`` or None), ``binding`` (index: the paused dispatch's binding bytes now, a uint8
    ``TensorRef``), ``bindings`` (all of them, a list of ``TensorRef``). Served while a run is paused.
    """

    query: str
    args: tuple[Any, ...] = ()


# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    pass


@dataclass(frozen=True)
class Opened(Event):
    module_path: str
    functions: tuple[str, ...]
    device: str


@dataclass(frozen=True)
class Stopped(Event):
    reason: str  # a StopReason: entry | step | breakpoint | paused | dispatch
    location: Location
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress(Event):
    """Sent before work that could crash (a dispatch), so a crash report can say what was running."""

    location: Location


@dataclass(frozen=True)
class Finished(Event):
    function: str
    results_text: str
    outputs: tuple[TensorRef, ...] = ()


@dataclass(frozen=True)
class Failed(Event):
    """The program failed the way IREE's runtime would (a VM trap, a HAL error): the session lives on."""

    message: str
    status: str | None = None
    location: Location = Location()


@dataclass(frozen=True)
class Crashed(Event):
    """The process running the session died (a signal, an abort) or stopped answering (a hang)."""

    reason: str
    location: Location
    exitcode: int | None = None


@dataclass(frozen=True)
class Answer(Event):
    """The answer to ``Evaluate(query, args)``; ``value`` may hold ``TensorRef``s (alone or in a list)."""

    query: str
    value: Any
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Log(Event):
    text: str
