"""Commands in, events out: the typed, plain-data protocol between a client (the window, the CLI, a
script, an adapter) and a session.

Every message is a dataclass defined here, and only plain data: numbers, strings, tuples, enums, other
dataclasses of this module, numpy arrays inside ``TensorRef``. Nothing is a Qt object or a live native
handle, so every message pickles and a session can run in this process, in a child process (a crashing
kernel must not take the window down), or behind a byte stream. Tensors travel as ``TensorRef``: inline
numpy arrays in-process, shared-memory blocks across processes.

Three kinds of message:

* **commands** (``Command``): ``Open``, ``SetBreakpoints``, ``Call``, ``Step``, ``Continue``, ``RunTo``,
  ``Reverse``, ``TravelTo``, ``Shutdown``;
* **queries** (``Query``, a command that changes nothing and is answered by exactly one ``Answer`` or a
  ``Failed``): each names its answer class in ``ANSWERS``; the answer carries the query it answers;
* **events** (``Event``): ``Opened``, ``Stopped`` (with a ``StopDetail``), ``Progress``, ``Finished``,
  ``Failed``, ``Crashed``, ``Log`` and the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
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


class ReverseMode(StrEnum):
    """gdb's reverse execution commands."""

    STEP = "reverse-step"
    NEXT = "reverse-next"
    FINISH = "reverse-finish"
    CONTINUE = "reverse-continue"


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
    """One frame of the call stack: ``ordinal`` is the function's ordinal in its module (None: unknown)."""

    module: str
    function: str
    pc: int
    instruction: str = ""
    ordinal: int | None = None


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

    @property
    def called_module(self) -> str | None:
        """The innermost frame's module when it is a compiled module the program calls (not the outermost
        frame's, the program's own); None in the program, or with no frames."""
        if not self.frames or self.frames[-1].module == self.frames[0].module:
            return None
        return self.frames[-1].module

    @property
    def function_name(self) -> str | None:
        """The innermost frame's function as a stop names it: ``abs`` in the program, ``module_a.abs`` in a
        module it calls; None with no frames."""
        if not self.frames:
            return None
        module = self.called_module
        return f"{module}.{self.frames[-1].function}" if module else self.frames[-1].function


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


# ------------------------------------------------------------------------------------------ stop details


@dataclass(frozen=True)
class RegisterFile:
    """The registers of one frame: the i32 bank as words, the ref bank as descriptions."""

    i32: tuple[int, ...] = ()
    ref: tuple[str, ...] = ()


@dataclass(frozen=True)
class DivergenceStop:
    """Where a ``diverge`` breakpoint found the live run leaving its reference, and how far."""

    ordinal: int
    name: str
    reference_name: str | None
    output: int | None
    max_abs_error: float | str  # a str for inf/nan ("inf"), so it stays JSON
    max_rel_error: float | str
    mismatches: int
    first_mismatch: tuple[int, ...] | None = None
    note: str = ""
    text: str = ""  # one sentence for people
    summary: str = ""  # the numerics' one-line verdict with its metrics (engine.dispatch.diverge_condition)
    # (ordinal, verdict) of every dispatch the breakpoint judged in this call, up to this one (numerics' words:
    # exact, within_rounding, within_tolerance, diverged): the window colours its dispatch list with them.
    verdicts: tuple[tuple[int, str], ...] = ()
    label: str = ""  # which tensor diverged, in the one vocabulary (``binding 3, write, output 0``)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "ordinal": self.ordinal,
            "name": self.name,
            "reference_name": self.reference_name,
            "output": self.output,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "mismatches": self.mismatches,
            "first_mismatch": list(self.first_mismatch) if self.first_mismatch is not None else None,
            "note": self.note,
            "summary": self.summary,
            "verdicts": [[o, v] for o, v in self.verdicts],
        }


@dataclass(frozen=True)
class TensorDescriptor:
    """One typed tensor of the dispatch a run stopped at, without its bytes (``ReadTensors`` gives them):
    ``label`` in the one vocabulary (``engine.dispatch.typed_tensors.binding_label``), where it lies, its type
    and where the type came from (``TypeSource``)."""

    label: str
    role: str
    position: int
    binding: int
    access: str
    element: str
    shape: tuple[int, ...]
    offset: int
    length: int
    type_source: str

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label, "role": self.role, "position": self.position, "binding": self.binding,
            "access": self.access, "element": self.element, "shape": list(self.shape), "offset": self.offset,
            "length": self.length, "type_source": self.type_source,
        }


@dataclass(frozen=True)
class NonFinite:
    """NaN and Inf a dispatch wrote to one tensor (typed: ``tensor`` is ``output N``) or binding (untyped:
    ``binding N``): how many, and the flat index of the first in that tensor or binding."""

    binding: int
    count: int
    nan: int
    inf: int
    first: int
    tensor: str = ""  # "output 0" (typed from the sources) or "binding 2" (the bound bytes); "" from old peers
    access: str = ""  # the binding's access (write, readwrite)

    def to_json(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor, "binding": self.binding, "access": self.access, "count": self.count,
            "nan": self.nan, "inf": self.inf, "first": self.first,
        }

    def describe(self) -> str:
        parts = [f"{n:,} {what}" for n, what in ((self.nan, "NaN"), (self.inf, "Inf")) if n]
        from engine.dispatch.typed_tensors import binding_label

        role, _, position = self.tensor.partition(" ")
        typed = role == "output" and position.isdigit()  # "binding N" when untyped: no role claimed
        where = binding_label(self.binding, self.access or "write", role if typed else None,
                              int(position) if typed else None)  # fmt: skip
        return (
            f"NaN/Inf written to {where}: {' and '.join(parts) or 'non-finite values'};"
            f" first at index {self.first}"
        )


@dataclass(frozen=True)
class StopDetail:
    """What a stop knows besides its location.

    ``registers``: the innermost frame's; ``breakpoints``: descriptions of those that matched;
    ``nan_bindings``: bindings a dispatch wrote NaN/Inf to; ``divergence``: a diverge breakpoint's finding;
    ``import_call``: the import a stop is at; ``steps``: instructions a step executed; ``position`` and
    ``earliest``: where a recorded run is in its history (instructions since the call began; None when the
    run is inside a dispatch or not recorded).
    """

    registers: RegisterFile = RegisterFile()
    breakpoints: tuple[str, ...] = ()
    nan_bindings: tuple[int, ...] = ()
    nonfinite: tuple[NonFinite, ...] = ()  # per binding in ``nan_bindings``: counts and the first index
    divergence: DivergenceStop | None = None
    import_call: str | None = None
    steps: int | None = None
    position: int | None = None
    earliest: int | None = None
    # The rest of the stop's one record (issue 35: no client asks for more after a stop): the end of the
    # recorded history and how many dispatches it holds (a client refreshes its History only when these
    # change), and the stopped dispatch's typed tensors, described (their bytes: ReadTensors).
    latest: int | None = None
    recorded_dispatches: int | None = None
    tensors: tuple[TensorDescriptor, ...] = ()


# -------------------------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Command:
    pass


# IREE's export of a module's initializer (its globals), run as the module loads (the same name as
# engine.runtime.debug_runner.INITIALIZER: the protocol imports no engine module).
INITIALIZER = "__init"


@dataclass(frozen=True)
class Open(Command):
    """Open a module; ``sources``: its executables' sources named by the user (files or folders, see
    ``engine.dispatch.typed_tensors.read_sources``), else those found beside it type the tensors, else (with
    ``rebuild_sources``) those of a rebuild of the program its debug locations name, when the rebuild's
    executables are the module's own (``engine.dispatch.rebuild_sources``)."""

    module_path: str
    device: str = "local-sync"
    sources: tuple[str, ...] = ()
    rebuild_sources: bool = True  # none found: rebuild them from the program the module's locations name
    # Rebuild them now and answer Opened once it is known what types the tensors: a script's first stop
    # record is then typed as its later ones (iree-lens debug); the window opens at once and types later.
    wait_for_sources: bool = False
    # ``[SCOPE=]FILE`` parameter archives a program compiled with external parameters loads its weights from
    # (``engine.runtime.parameters``), as iree-run-module's --parameters.
    parameters: tuple[str, ...] = ()
    # Leave the module's initializer (``__init``: its globals, the weights IREE's const-expr hoisting
    # transposes, packs or dequantizes) to a ``Call`` of ``__init``, so that it runs under the debugger, its
    # dispatches stopped at and shown as a call's; until it ran, no other function can be called (debug engine;
    # a call of __init on a module opened without it opens the module so first).
    initializer: bool = False
    # The compiled modules the program calls (iree-run-module's --module), registered before it; those not
    # given are looked for beside it (``engine.runtime.module_dependencies``).
    modules: tuple[str, ...] = ()
    # Shared libraries that provide functions its CPU kernels import (iree-run-module's --executable_plugin),
    # registered for the session's process (``engine.runtime.hal.executable_plugins``) before it loads.
    executable_plugins: tuple[str, ...] = ()


@dataclass(frozen=True)
class Call(Command):
    """Start calling ``function`` with ``inputs`` (``--input`` strings); stop at entry when asked.
    ``results_text``: whether ``Finished`` carries the results printed as ``iree-run-module`` prints them
    (formatting a large tensor costs more than running a small program: a caller that only watches, or
    reads ``Finished.outputs``, says False)."""

    function: str
    inputs: tuple[str, ...] = ()
    stop_at_entry: bool = False
    results_text: bool = True


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
class Reverse(Command):
    """Run backwards: ``mode`` a ``ReverseMode``; ``count`` for reverse-step and reverse-next. Answered with
    ``Stopped`` (reason ``step``, ``breakpoint``, ``dispatch``, or ``history-start``)."""

    mode: str = ReverseMode.STEP
    count: int = 1


@dataclass(frozen=True)
class TravelTo(Command):
    """Go to a recorded moment: ``position`` (instructions since the call began), or ``dispatch`` (its
    run ordinal) ``before`` or ``after`` it ran. Answered with ``Stopped`` (reason ``step``/``dispatch``).
    With ``dispatch`` and ``park``: run forward into the dispatch and park there, before it runs or after it
    ran (``when``), as a forward dispatch stop does, so its bindings can be read (what a window shows)."""

    position: int | None = None
    dispatch: int | None = None
    when: str = DispatchWhen.BEFORE
    park: bool = False


@dataclass(frozen=True)
class Shutdown(Command):
    pass


# --------------------------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query(Command):
    """A question to the session: answered by one ``Answer`` (``ANSWERS[type(query)]``) or a ``Failed``."""


@dataclass(frozen=True)
class ReadRegisters(Query):
    """The registers of frame ``depth`` (Python indexing over the call's frames: -1 the innermost)."""

    depth: int = -1


@dataclass(frozen=True)
class ReadGlobals(Query):
    """The main module's globals."""


@dataclass(frozen=True)
class ReadGlobalBuffer(Query):
    """The bytes of ref global ``ordinal`` now (a buffer or buffer view), typed when its tensor type is known."""

    ordinal: int


@dataclass(frozen=True)
class ReadFrames(Query):
    """The call stack (outermost first)."""


@dataclass(frozen=True)
class ReadDispatch(Query):
    """The dispatch the run is paused in (None when it is not)."""


@dataclass(frozen=True)
class ReadBinding(Query):
    """The bytes of binding ``index`` of the paused dispatch, now (before or after it ran)."""

    index: int


@dataclass(frozen=True)
class ReadBindings(Query):
    """The bytes of every binding of the paused dispatch."""


@dataclass(frozen=True)
class ReadTensors(Query):
    """The paused dispatch's bindings as tensors, typed in the session from the best source there is.

    ``wait_for_sources``: when the session is still rebuilding the executables' sources, answer once the
    rebuild is done (the same tensors whenever a script asks) rather than at once, untyped until then.
    ``refresh``: the client reads again a stop it already shows (the rebuild of the sources ended: typed now,
    or why not). The run may have moved on since, which is no error: then the answer has no tensors and
    ``info`` None, and the client updates only an open view of that same stop (it opens nothing)."""

    wait_for_sources: bool = False
    refresh: bool = False


@dataclass(frozen=True)
class ReadHistory(Query):
    """Where a recorded run is in its history (``History``)."""


@dataclass(frozen=True)
class ReadDisassembly(Query):
    """The instructions of VM function ``function`` (an export or internal name) of the open module: a query
    about the module file, which the session's side answers (``engine.session.module_queries``)."""

    function: str


@dataclass(frozen=True)
class ReadModuleFile(Query):
    """The bytes of the module file ``path`` on the session's side (a relative path is taken from the
    session's working directory); no module needs to be open (``engine.session.module_queries``)."""

    path: str


@dataclass(frozen=True)
class Watch:
    """Something whose last change a ``WhenChanged`` looks for."""

    def describe(self) -> str:
        return repr(self)


@dataclass(frozen=True)
class WatchRegister(Watch):
    """Register ``index`` of bank ``bank`` (``i`` or ``r``) in frame ``depth`` (0: the call's entry frame)."""

    depth: int
    bank: str
    index: int

    def describe(self) -> str:
        return f"%{'i' if self.bank == 'i' else 'r'}{self.index} (frame {self.depth})"


@dataclass(frozen=True)
class WatchGlobal(Watch):
    """``length`` bytes at ``offset`` of module ``module``'s primitive globals (``.rwdata``; module "": the
    opened module, as for ``WatchGlobalRef`` and ``WatchGlobalContents``)."""

    module: str
    offset: int
    length: int = 4
    kind: str = ""  # i32, i64, f32, f64: the answer's values as that number ("": its bytes in hex)

    def describe(self) -> str:
        return f".rwdata[{self.offset}]"


@dataclass(frozen=True)
class WatchGlobalRef(Watch):
    """Ref global ``index`` of module ``module``."""

    module: str
    index: int

    def describe(self) -> str:
        return f".refs[{self.index}]"


@dataclass(frozen=True)
class WatchGlobalContents(Watch):
    """The bytes of the buffer ref global ``index`` of module ``module`` holds now (not the ref: a buffer
    written in place, or filled by a copy, keeps its ref): all of them, or ``length`` at ``offset`` (one
    element, read as ``element``, e.g. ``f32``; "": as the program declares the global's tensor)."""

    module: str
    index: int
    offset: int = 0
    length: int = -1
    element: str = ""

    def describe(self) -> str:
        part = "" if self.length < 0 else f" bytes [{self.offset}, {self.offset + self.length})"
        return f"the contents of .refs[{self.index}]{part}"


@dataclass(frozen=True)
class WatchBinding(Watch):
    """``length`` bytes at ``offset`` of binding ``binding`` of the dispatch the run is parked in, as they
    were before it ran (one element of an input, read as ``element``): where did they come from? Asked
    inside the dispatch; the session goes back in the history and parks there again."""

    binding: int
    offset: int
    length: int
    element: str = ""

    def describe(self) -> str:
        return f"binding {self.binding} bytes [{self.offset}, {self.offset + self.length})"


@dataclass(frozen=True)
class WatchRegisterContents(Watch):
    """The bytes of the buffer (or buffer view) ref register ``register`` of frame ``depth`` holds now: all of
    them, or element ``element`` (flat index) of a buffer view (byte ``element`` of a buffer)."""

    depth: int
    register: int
    element: int = -1

    def describe(self) -> str:
        what = "the contents" if self.element < 0 else f"element {self.element}"
        return f"{what} of %r{self.register} (frame {self.depth})"


@dataclass(frozen=True)
class WhenChanged(Query):
    """When did ``watch`` last change before now (in the recorded history)? Answered by ``LastChange``."""

    watch: Watch


@dataclass(frozen=True)
class Substitute(Query):
    """Build the replacement source at ``path`` for executable ``executable``, check it and swap it in."""

    executable: str
    path: str


@dataclass(frozen=True)
class RerunDispatch(Query):
    """The paused (or last observed) dispatch again, from its inputs, with the current code."""


@dataclass(frozen=True)
class RevertSubstitution(Query):
    executable: str


@dataclass(frozen=True)
class ExportSubstitutions(Query):
    """Write the edited files and the iree-compile flags that reproduce them into ``folder``."""

    folder: str


@dataclass(frozen=True)
class BenchmarkDispatch(Query):
    repeats: int = 20


# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    pass


@dataclass(frozen=True)
class Opened(Event):
    module_path: str
    functions: tuple[str, ...]
    device: str
    # Dispatches the module's initializer ran as it loaded (IREE's const-expr hoisting puts weight transforms
    # there): unseen by the session, which stops in them only with the initializer left to a call.
    initializer_dispatches: int = 0

    def initializer_note(self, how: str) -> str:
        """What a user is told of the initializer's dispatches ("" for none); ``how``: how to stop in them."""
        n = self.initializer_dispatches
        if not n:
            return ""
        return (f"the module's initializer ({INITIALIZER}) ran {n} dispatch{'es' if n != 1 else ''} as the module "
                f"loaded, not stopped at ({how} stops in them)")


@dataclass(frozen=True)
class Stopped(Event):
    reason: str  # a StopReason (or history-start after a reverse command)
    location: Location
    detail: StopDetail = StopDetail()


@dataclass(frozen=True)
class Progress(Event):
    """Sent before work that could crash (a dispatch), so a crash report can say what was running. Before a
    native batch: ``batch`` names its dispatches (IREE's export names, in order) and ``batch_first`` is the
    run ordinal of the first; which of them runs is in the device's progress cell (``Device.progress_cell``),
    shared memory the parent of a child session reads when the child dies. ``batch_id`` numbers a batch's
    list of names: only the first Progress of an id carries ``batch``, later ones (the same planned batch,
    call after call) carry the id alone (``BatchNames`` fills them in)."""

    location: Location
    batch: tuple[str, ...] = ()
    batch_first: int = 0
    batch_id: int = 0


class BatchNames:
    """A receiver's memory of the batch names a session sent (``Progress.batch_id``): the latest ``keep``
    lists (a sender reuses at most ``BATCH_IDS_LIVE`` ids before it numbers new ones and sends them again)."""

    def __init__(self, keep: int = 1024):
        self.keep = keep
        self._names: dict[int, tuple[str, ...]] = {}

    def complete(self, progress: Progress) -> Progress:
        """``progress`` with its batch's names (as first sent when it carries only the id)."""
        if not progress.batch_id:
            return progress
        if progress.batch:
            self._names[progress.batch_id] = progress.batch
            if len(self._names) > self.keep:
                del self._names[next(iter(self._names))]  # the oldest id
            return progress
        names = self._names.get(progress.batch_id)
        return progress if names is None else replace(progress, batch=names)


BATCH_IDS_LIVE = 256


@dataclass(frozen=True)
class Finished(Event):
    function: str
    results_text: str
    outputs: tuple[TensorRef, ...] = ()
    # (ordinal, verdict) of each dispatch a diverge breakpoint judged in this call (none diverged, or only
    # after its stop): the window colours its dispatch list with them (see DivergenceStop.verdicts).
    verdicts: tuple[tuple[int, str], ...] = ()
    exports: tuple[tuple[int, str], ...] = ()  # (ordinal, export name) of each dispatch in ``verdicts``


@dataclass(frozen=True)
class RefusedBreakpoint:
    """A breakpoint a SetBreakpoints could not set, and why (no dispatch has that name, the diverge reference
    is not a capture bundle or a module...)."""

    breakpoint: Breakpoint
    reason: str


@dataclass(frozen=True)
class Failed(Event):
    """The program failed the way IREE's runtime would (a VM trap, a HAL error), or a command or query could
    not be done: the session lives on."""

    message: str
    status: str | None = None  # IREE's status code name; BREAKPOINT_REFUSED: a breakpoint that cannot match
    location: Location = Location()
    refused: tuple[RefusedBreakpoint, ...] = ()  # BREAKPOINT_REFUSED: each breakpoint refused, with its reason


# ``Failed.status`` of a SetBreakpoints whose breakpoints could never stop a run (the others are set): a
# client says so and goes on, as gdb does for a breakpoint it cannot set.
BREAKPOINT_REFUSED = "breakpoint-refused"


@dataclass(frozen=True)
class Crashed(Event):
    """The process running the session died (a signal, an abort) or stopped answering (a hang)."""

    reason: str
    location: Location
    exitcode: int | None = None


@dataclass(frozen=True)
class Log(Event):
    """A note for the user. ``about`` says what it settles, for a client that acts on it: ``"sources"``, the
    executables' sources were looked for or rebuilt, and what types the tensors is now known (a client
    showing a stop read before reads it again: ``ReadTensors(refresh=True)``)."""

    text: str
    about: str = ""


# --------------------------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Answer(Event):
    """The answer to ``query`` (each query type has its own answer type, ``ANSWERS``)."""

    query: Query


@dataclass(frozen=True)
class Registers(Answer):
    registers: RegisterFile


@dataclass(frozen=True)
class GlobalVariable:
    """One global of the main module by the name its compilation gave it (``engine.runtime.vmfb.global_names``)."""

    name: str
    kind: str  # "ref", or the primitive type: i32, i64, f32, f64
    index: int  # the ref ordinal, or the byte offset in .rwdata
    value: str  # the value now: a number, or the ref's description
    byte_length: int | None = None  # a buffer's (or buffer view's) bytes, readable with ReadGlobalBuffer
    tensor_type: str = ""  # the tensor a buffer holds (8xf32), when the program's flow phase says and it fits


@dataclass(frozen=True)
class Globals(Answer):
    """The main module's ``.rwdata`` bytes and ref globals (descriptions); ``variables`` by name when the
    compilation's VM phase names them (the program's own first, the compiler's ``__...`` after),
    ``names_note`` where the names come from or why there are none."""

    rwdata: bytes
    refs: tuple[str, ...]
    variables: tuple[GlobalVariable, ...] = ()
    names_note: str = ""


@dataclass(frozen=True)
class GlobalBuffer(Answer):
    """A ref global's bytes now: typed (``tensor.element_type``) when its tensor type is known, else uint8."""

    name: str  # its name, or ``.refs[N]``
    tensor: TensorRef
    type_note: str  # the type and where it comes from, or why the bytes are untyped


@dataclass(frozen=True)
class Frames(Answer):
    frames: tuple[FrameInfo, ...]


@dataclass(frozen=True)
class PausedDispatch(Answer):
    info: DispatchInfo | None


@dataclass(frozen=True)
class BindingBytes(Answer):
    """One binding's bytes (a uint8 tensor; the reference engine's trace points are typed already)."""

    index: int
    tensor: TensorRef


@dataclass(frozen=True)
class Bindings(Answer):
    tensors: tuple[TensorRef, ...]


class TypeSource(StrEnum):
    """Where a tensor's shape and element type came from."""

    UNTYPED = "untyped"  # exactly the bound bytes (uint8), no type claimed
    RUNTIME = "runtime"  # IREE's runtime typed it (a trace point's buffer view)
    SOURCES = "sources"  # the executables' sources (hal.interface bindings)


@dataclass(frozen=True)
class DispatchTensor:
    """One tensor of the paused dispatch, typed in the session (``engine.dispatch.typed_tensors``):
    ``length`` bytes at ``offset`` of binding ``index``. ``role``: ``input`` (the dispatch reads it: its
    bytes before it ran), ``output`` (it writes it: its bytes after; ``written`` False at a stop before the
    dispatch, when they are what the memory holds, not the output yet) or ``binding`` (untyped, before the
    dispatch ran: whether it reads or writes it is unknown); ``position`` its place among the inputs or
    outputs (IREE's operand order). ``access`` read/write/readwrite/unknown; ``type_source`` (a
    ``TypeSource``) says where the shape and element type came from, ``type_note`` more (the source file,
    why a source did not fit). ``undefined``: the byte ranges ``(start, stop)`` of the tensor (relative to
    it) that no dispatch defined before (a tensor read and written in place: IREE's reused slabs, in-place
    concatenation; the capture's ``DispatchEntry.undefined`` by the same rule): leftovers, not data; None
    where that is not known (a dispatch ran without its executable's sources)."""

    index: int
    access: str
    tensor: TensorRef
    type_source: str = TypeSource.UNTYPED
    type_note: str = ""
    role: str = "binding"
    position: int = 0
    offset: int = 0
    length: int = 0
    written: bool = True
    undefined: tuple[tuple[int, int], ...] | None = ()
    declared: str = ""  # the source's type where the tensor is another view of its bytes (TypedTensor.declared)
    # The module global whose buffer the tensor lies in (``@state``, ``.refs[3]`` unnamed): the program's state
    # (a KV cache) or a hoisted constant, not a transient; "" for none.
    global_name: str = ""

    @property
    def label(self) -> str:
        return f"{self.role} {self.position}"

    @property
    def undefined_bytes(self) -> int | None:
        return None if self.undefined is None else sum(e - s for s, e in self.undefined)


@dataclass(frozen=True)
class Tensors(Answer):
    info: DispatchInfo | None
    tensors: tuple[DispatchTensor, ...]


@dataclass(frozen=True)
class DispatchMark:
    """A recorded dispatch: its run ordinal, IREE's name, and the instruction position it ran at (``exact``
    False: the start of the fast run it ran in, until travelled to)."""

    ordinal: int
    name: str
    position: int
    exact: bool


@dataclass(frozen=True)
class History(Answer):
    """A recorded run's span and where the run is in it (``position`` None: inside a dispatch)."""

    recording: bool
    position: int | None = None
    earliest: int = 0
    latest: int = 0
    memory_bytes: int = 0
    dispatches: tuple[DispatchMark, ...] = ()


@dataclass(frozen=True)
class Change:
    """The last change of a watch: at instruction ``position`` in ``module.function`` at ``pc`` (by dispatch
    ``dispatch``, a run ordinal, when a dispatch wrote it), from ``before`` to ``after`` (ints, hex bytes, ref
    type names; None: absent)."""

    watch: str
    position: int
    module: str
    function: str
    pc: int
    dispatch: int | None
    before: int | str | None
    after: int | str | None
    # A buffer's bytes: where they came from ("dispatch #0 accumulate_dispatch_0…", "a copy from allocation
    # #4 bytes [0, 32), written by dispatch #0 …"), and which element changed ("element [1] of 8xf32; …").
    via: str = ""
    detail: str = ""
    made_by: int | None = None  # the dispatch at the end of ``via`` (a run ordinal): it made the bytes


@dataclass(frozen=True)
class LastChange(Answer):
    change: Change | None  # None: no change in the recorded history


@dataclass(frozen=True)
class EditDiagnostic:
    """One compiler message at a line of an edited file (1-based; 0 when the tool gave none)."""

    path: str
    line: int
    column: int
    severity: str
    message: str


@dataclass(frozen=True)
class SubstitutionRefused(Answer):
    """A substitution query that could not be done: ``kind`` compile | interface | substitution."""

    kind: str
    message: str
    diagnostics: tuple[EditDiagnostic, ...] = ()


@dataclass(frozen=True)
class Substituted(Answer):
    exports: tuple[str, ...]
    whole: bool
    seconds: float


@dataclass(frozen=True)
class DispatchRerun(Answer):
    """Each binding's bytes after the rerun, and before (the original run's, when known)."""

    sequence: int | None
    before: tuple[TensorRef, ...] | None
    after: tuple[TensorRef, ...]


@dataclass(frozen=True)
class SubstitutionReverted(Answer):
    executable: str


@dataclass(frozen=True)
class SubstitutionsExported(Answer):
    path: str


@dataclass(frozen=True)
class DispatchBenchmark(Answer):
    """Seconds per dispatch (median), the module's code against the current edits; the spreads are the 10th
    and 90th percentiles of the samples; ``edited`` False when no edit is active (both are the original)."""

    original_s: float
    edited_s: float
    original_spread_s: tuple[float, float] | None = None
    edited_spread_s: tuple[float, float] | None = None
    edited: bool = True
    # iree-benchmark-executable on the same binaries, inputs and workgroup count (None: not installed/failed).
    iree_original_s: float | None = None
    iree_edited_s: float | None = None


@dataclass(frozen=True)
class Disassembly(Answer):
    """``(pc, text)`` of each instruction, the text as ``iree-dump-module --output=disassembly`` prints it."""

    function: str
    lines: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class ModuleFile(Answer):
    """A module file's bytes (``data``, uint8) and its absolute ``path`` on the session's side (what
    ``Open`` should name: the session's working directory does not move with the client)."""

    path: str
    data: np.ndarray


# The answer type of each query (a substitution query may also answer ``SubstitutionRefused``).
ANSWERS: dict[type[Query], type[Answer]] = {
    ReadRegisters: Registers,
    ReadGlobals: Globals,
    ReadGlobalBuffer: GlobalBuffer,
    ReadFrames: Frames,
    ReadDispatch: PausedDispatch,
    ReadBinding: BindingBytes,
    ReadBindings: Bindings,
    ReadTensors: Tensors,
    ReadHistory: History,
    WhenChanged: LastChange,
    Substitute: Substituted,
    RerunDispatch: DispatchRerun,
    RevertSubstitution: SubstitutionReverted,
    ExportSubstitutions: SubstitutionsExported,
    BenchmarkDispatch: DispatchBenchmark,
    ReadDisassembly: Disassembly,
    ReadModuleFile: ModuleFile,
}
SUBSTITUTION_QUERIES = (Substitute, RerunDispatch, RevertSubstitution, ExportSubstitutions, BenchmarkDispatch)


def tensor_refs(message: object):
    """Every ``TensorRef`` a message holds, at any depth (dataclass fields, tuples, lists, dicts)."""
    if isinstance(message, TensorRef):
        yield message
    elif isinstance(message, list | tuple):
        for v in message:
            yield from tensor_refs(v)
    elif isinstance(message, dict):
        for v in message.values():
            yield from tensor_refs(v)
    elif is_dataclass(message) and not isinstance(message, type):
        for f in fields(message):
            yield from tensor_refs(getattr(message, f.name))
