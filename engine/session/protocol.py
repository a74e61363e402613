"""Commands in, events out: the plain-data protocol between a client (the window, a script) and a session.

Nothing here is a Qt object or a live native handle, so a session can run in this process, in a child
process (a crashing kernel must not take the window down), or one day on another machine. Tensors travel
as ``TensorRef``: inline numpy arrays in-process, shared-memory blocks across processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ------------------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Breakpoint:
    """Where to stop: ``kind`` is ``instruction`` (function + pc), ``function`` (entry) or ``import`` (name)."""

    kind: str
    function: str | None = None
    pc: int | None = None
    import_name: str | None = None
    module: str | None = None


@dataclass(frozen=True)
class FrameInfo:
    module: str
    function: str
    pc: int
    instruction: str = ""


@dataclass(frozen=True)
class Location:
    """Where a run is: its call stack (innermost last) and, during a dispatch, which one."""

    frames: tuple[FrameInfo, ...] = ()
    dispatch: str | None = None
    dispatch_index: int | None = None

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
    mode: str = "into"  # into | over | out


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
    """Run a named engine-side query (e.g. ``registers``, ``globals``) and answer with ``Answer``."""

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
    reason: str  # entry | step | breakpoint | pause | dispatch
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
    query: str
    value: Any


@dataclass(frozen=True)
class Log(Event):
    text: str
