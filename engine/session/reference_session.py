"""A session on IREE's own runtime (``iree.runtime``): dispatch stops at the module's trace points.

IREE's runtime runs a program natively; the only places it calls back into Python are the trace points a
module compiled with ``--iree-flow-trace-dispatch-tensors`` has before (``inputs``) and after (``outputs``)
each dispatch, which reach a ``HalModuleDebugSink`` callback on the invoking thread. ``ReferenceSession``
runs the program on a run thread and blocks in that callback at a dispatch breakpoint, so the protocol is
the debug session's: ``Stopped(reason="dispatch")`` with a ``DispatchInfo``, ``ReadBinding(k)``
while parked, ``Continue`` and ``Step(mode="dispatch")`` to resume. It has no VM to step: instruction,
function and import breakpoints and instruction steps are refused with a message saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.dispatch.trace_pairing import TracePairing, heads_without_inputs
from engine.dispatch.typed_tensors import binding_label, output_modes
from engine.errors import LensError
from engine.runtime.element_types import BOOLEAN, ElementType
from engine.runtime.function_io import Tensor, format_results, parse_inputs, split_cconv
from engine.runtime.module_dependencies import found_beside
from engine.runtime.parameters import ParameterArchives
from engine.session.dispatch_gate import dispatch_matches, module_dispatch_names, unmatchable
from engine.session.nonfinite import nonfinite_changed, nonfinite_in
from engine.session.parked_run import ParkedRun
from engine.session.protocol import (
    BREAKPOINT_REFUSED,
    BindingBytes,
    BindingInfo,
    Bindings,
    Breakpoint,
    BreakpointKind,
    Call,
    Command,
    Continue,
    DispatchInfo,
    DispatchTensor,
    DispatchWhen,
    Event,
    Failed,
    Finished,
    Location,
    Log,
    Open,
    Opened,
    PausedDispatch,
    Query,
    ReadBinding,
    ReadBindings,
    ReadDispatch,
    ReadTensors,
    RefusedBreakpoint,
    SetBreakpoints,
    Step,
    StepMode,
    StopDetail,
    Stopped,
    StopReason,
    TensorDescriptor,
    TensorRef,
    Tensors,
    TypeSource,
)


def _element(array: np.ndarray) -> str:
    """IREE's element type name of a trace point's array (its numpy dtype's)."""
    from engine.dispatch.tensor_types import element_name

    return element_name(array.dtype)

TRACE_IMPORT = "hal.buffer_view.trace"
NO_TRACE_POINTS = (
    "{module} has no dispatch trace points, so IREE's runtime cannot stop at its dispatches: recompile it "
    "with --iree-flow-trace-dispatch-tensors, or use --engine=debug (any module)"
)


class ReferenceSessionError(LensError):
    """A command the reference engine cannot do (it only stops at trace points)."""


def has_trace_points(module_path: str) -> bool:
    """True when the module imports ``hal.buffer_view.trace`` (it was compiled with trace flags)."""
    from engine.runtime.vmfb.module import open_vmfb

    return any(imp.full_name == TRACE_IMPORT for imp in open_vmfb(module_path).imports)


class ReferenceSession:
    def __init__(self, emit: Callable[[Event], Any]):
        self.emit = emit
        self.runner: Any = None
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self.run = ParkedRun("reference-run")  # parked inside IREE's debug-sink callback at a stop
        self._stop_at_next = False
        self._pairing = TracePairing()  # the call's trace points paired into numbered dispatches
        self._without_inputs: frozenset[str] = frozenset()  # the open module's (heads_without_inputs)
        self._info: DispatchInfo | None = None
        self._arrays: list[np.ndarray] = []
        self._declared: list[str] = []  # per array, the packed type its bytes hold (i4), else ""
        self._function = ""
        self._sink: Any = None
        self._module_path: str | None = None
        self._traced = False  # the open module has dispatch trace points (stops need them)
        self._open: Open | None = None
        self._interfaces: dict | None = None  # the executables' interfaces, looked for at the first NaN check
        self._sources: Any = None  # their SessionSources, made when a NaN breakpoint is set
        self._dispatch_names: tuple[tuple[str, ...] | None] | None = None  # the module's (worked out once)
        self._handlers: dict[type, Callable[[Any], None]] = {
            Open: self._on_open,
            SetBreakpoints: self._on_set_breakpoints,
            Call: self._on_call,
            Continue: self._on_continue,
            Step: self._on_step,
        }

    def handle(self, command: Command) -> None:
        handler = self._on_query if isinstance(command, Query) else self._handlers.get(type(command))
        try:
            if handler is None:
                raise ReferenceSessionError(
                    f"the reference engine cannot do {type(command).__name__}: it stops only at dispatches"
                )
            handler(command)
        except LensError as e:
            self.emit(Failed(str(e), getattr(e, "status", None), self._location()))

    def pause(self) -> None:
        self._stop_at_next = True  # the next trace point stops

    def close(self) -> None:
        """Abandon a paused run and let IREE's runtime objects go (before the interpreter exits)."""
        self._abandon()
        self.run.close()
        self._close_sources()
        self.runner = None
        self._sink = None

    def _close_sources(self) -> None:
        if self._sources is not None:
            self._sources.close()  # a rebuild still running: its compiler is killed
            self._sources = None

    def _abandon(self) -> None:
        self.run.abandon()

    # -- commands

    def _on_open(self, command: Open) -> None:
        import iree.runtime as rt

        from engine.runtime.reference import ReferenceRunner

        self.close()
        if command.initializer:
            raise ReferenceSessionError(
                "the reference engine is IREE's runtime, which runs the module's initializer (__init) as it loads "
                "the module: to stop in the initializer, use the debug engine (--engine=debug)"
            )
        # A module without trace points still runs (a plain reference run); it is refused where a stop at a
        # dispatch is asked for (a breakpoint, a stop at the first dispatch), which only trace points give.
        self._traced = has_trace_points(command.module_path)
        self._without_inputs = heads_without_inputs(command.module_path) if self._traced else frozenset()
        sink = rt.HalModuleDebugSink(self._trace)
        parameters = ParameterArchives.open_given(command.parameters)
        self.runner = ReferenceRunner(command.module_path, command.device, debug_sink=sink, parameters=parameters,
                                      modules=list(command.modules))  # fmt: skip
        for line in found_beside(self.runner):
            self.emit(Log(line))
        self._sink = sink  # alive as long as the module
        self._module_path = command.module_path
        self._open = command
        self._interfaces = None
        self._close_sources()
        self._dispatch_names = None
        self.emit(Opened(command.module_path, tuple(self.runner.function_names), command.device))

    def _need_trace_points(self) -> None:
        if not self._traced:
            raise ReferenceSessionError(NO_TRACE_POINTS.format(module=self._module_path))

    def _nonfinite_written(self, export: str, arrays: list[np.ndarray], inputs) -> list:
        """The NaN/Inf each float output of a trace point holds that the dispatch wrote. An output updated in
        place (a tied operand) is among the inputs too, whole, with what it held before: IREE writes a padded
        tensor's border (max-pool's -inf) with a fill and the producer's dispatch its interior, so judged whole,
        the elementwise producer "wrote" the border's -inf. Such an output is judged on the elements that
        differ from each input of its shape and type, as the debug engine judges an output updated in place
        (engine.session.nonfinite). Where the executables' sources say an output is not updated in place
        (``writeonly``), it is judged whole: a NaN an elementwise dispatch carried over from its input is
        written there (the debug engine counts it); the trace alone does not tell, so without sources every
        output is judged as if in place."""
        modes = output_modes(self._export_interfaces().get(export) or {})
        found = []
        for k, a in enumerate(arrays):
            if a.dtype.kind not in "fc":  # floats and complex hold NaN
                continue
            if len(modes) == len(arrays) and modes[k] == "writeonly":
                found.append(nonfinite_in(a.reshape(-1), k, f"output {k}", access="write"))
                continue
            same = [i.reshape(-1) for i in inputs or () if i.shape == a.shape and i.dtype == a.dtype]
            found.append(nonfinite_changed(a.reshape(-1), same, k, f"output {k}", access="write"))
        return [f for f in found if f is not None]

    def _export_interfaces(self) -> dict:
        """The module's executable interfaces (given, beside the module, else the checked rebuild of its
        program, as the debug session finds them; the rebuild started when the NaN breakpoint was set), waited
        for at the first NaN check; empty when none, or when the user's Stop ended the wait (this check is then
        judged as without sources, the safe rule, and the next one uses them once they are there)."""
        if self._interfaces is None:
            sources = self._sources_for_nan()
            if not sources.wait(lambda: self._stop_at_next, "to tell which outputs are updated in place"):
                self.emit(Log("break nan: stopped before the sources' rebuild was done: outputs judged as if "
                              "updated in place", about="sources"))  # fmt: skip
                return {}
            found = sources.sources
            self._interfaces = found.interfaces if found.found else {}
            what = "outputs updated in place told by " if found.found else "outputs updated in place not known: "
            self.emit(Log(f"break nan: {what}{found.describe()}", about="sources"))
        return self._interfaces

    def _sources_for_nan(self):
        """The module's ``SessionSources``, made once: the rebuild (when needed) starts at once, on a thread,
        so it runs while the program loads and runs to its first dispatch; closing the session kills it."""
        if self._sources is None:
            from engine.dispatch.rebuild_sources import SessionSources

            command = self._open
            tell = lambda text: self.emit(Log(f"break nan: {text}", about="sources"))  # noqa: E731
            self._sources = SessionSources(command.module_path, command.sources, command.rebuild_sources, tell)
            if not self._sources.sources.found and command.rebuild_sources:
                self.emit(Log("break nan: looking for the executables' sources (a rebuild of the program, once) to "
                              "tell which outputs are updated in place", about="sources"))  # fmt: skip
            self._sources.ensure()
        return self._sources

    def _on_set_breakpoints(self, command: SetBreakpoints) -> None:
        if command.breakpoints and self._module_path is not None:
            self._need_trace_points()
        refused = [b for b in command.breakpoints if b.kind not in (BreakpointKind.DISPATCH, BreakpointKind.NAN)]
        if refused:
            raise ReferenceSessionError(
                f"the reference engine stops only at dispatches (trace points); not at {refused[0].kind} "
                "breakpoints: use --engine=debug"
            )
        if self._module_path is not None:
            from engine.runtime.vmfb.module import open_vmfb

            if self._dispatch_names is None:
                self._dispatch_names = (module_dispatch_names(open_vmfb(self._module_path)),)
            name = os.path.basename(self._module_path)
            problems = {b: p for b in command.breakpoints if (p := unmatchable(b, self._dispatch_names[0], name))}
            if problems:  # the others are set; these could never stop a run
                self.breakpoints = tuple(b for b in command.breakpoints if b not in problems)
                reasons = tuple(RefusedBreakpoint(b, why) for b, why in problems.items())
                self.emit(Failed("; ".join(problems.values()), BREAKPOINT_REFUSED, refused=reasons))
                return
        self.breakpoints = command.breakpoints
        self._start_nan_sources()

    def _start_nan_sources(self) -> None:
        """A NaN breakpoint will need the executables' sources at its first check: they are looked for (and a
        rebuild started) now, so the run does not wait for all of it at its first dispatch."""
        if self._open is not None and any(b.kind == BreakpointKind.NAN for b in self.breakpoints):
            self._sources_for_nan()

    def _on_call(self, command: Call) -> None:
        self._abandon()
        if self.runner is None:
            raise ReferenceSessionError("no module is open")
        arg_kinds, _ = split_cconv(self.runner.cconv(command.function))
        args = parse_inputs(list(command.inputs), arg_kinds)
        if command.stop_at_entry or self.breakpoints:  # (breakpoints set before the module was opened too)
            self._need_trace_points()
        self._function = command.function
        self._start_nan_sources()  # (breakpoints set before the module was opened)
        self._pairing = TracePairing(self._without_inputs)
        self._stop_at_next = command.stop_at_entry  # no VM entry to stop at: the first dispatch
        self.run.start(lambda: self._run(command.function, args, command.results_text))

    def _on_continue(self, command: Continue) -> None:
        self._need_parked()
        self.run.resume(command)

    def _on_step(self, command: Step) -> None:
        if command.mode != StepMode.DISPATCH:
            raise ReferenceSessionError(
                "the reference engine has no VM to step: it steps only from dispatch to dispatch "
                "(use --engine=debug)"
            )
        self._need_parked()
        self.run.resume(command)

    def _on_query(self, query: Query) -> None:
        if isinstance(query, ReadDispatch):
            self.emit(PausedDispatch(query, self._dispatch()))
        elif isinstance(query, ReadBinding):
            self.emit(BindingBytes(query, query.index, self._binding(query.index)))
        elif isinstance(query, ReadBindings):
            self.emit(Bindings(query, tuple(self._bindings())))
        elif isinstance(query, ReadTensors):
            # IREE's runtime typed them: the trace point's buffer views (inputs before, outputs after).
            after = self._info is not None and self._info.when == DispatchWhen.AFTER
            access, role = ("write", "output") if after else ("read", "input")
            tensors = tuple(
                DispatchTensor(k, access, t, TypeSource.RUNTIME, "IREE's trace point", role, k, 0, t.to_numpy().nbytes,
                               declared=self._declared[k] if k < len(self._declared) else "")
                for k, t in enumerate(self._bindings())
            )
            self.emit(Tensors(query, self._dispatch(), tensors))
        else:
            raise ReferenceSessionError(
                "the reference engine answers only ReadDispatch, ReadBinding, ReadBindings and ReadTensors "
                f"(asked {type(query).__name__})"
            )

    # -- the run thread

    def _run(self, function: str, args: list, results_text: bool = True) -> None:
        try:
            values = self.runner.invoke(function, args)
            outputs = tuple(
                TensorRef(v.shape, v.array.dtype.str, v.element_type.name, array=v.array)
                for v in values
                if isinstance(v, Tensor)
            )
            self.emit(Finished(function, format_results(values) if results_text else "", outputs))
        except LensError as e:
            self.emit(Failed(str(e), getattr(e, "status", None), self._location()))
        except Exception as e:  # a bug must end the run with a message
            self.emit(Failed(f"{type(e).__name__}: {e}", None, self._location()))
        finally:
            self._info = None

    def _trace(self, key: str, buffer_views: list) -> None:
        """The debug sink's callback (run thread): one trace point, ``exe::export inputs|outputs``."""
        head, _, kind = key.rpartition(" ")
        parts = head.split("::")
        executable, export = parts[0], parts[1] if len(parts) > 1 else parts[0]
        when = DispatchWhen.AFTER if kind == "outputs" else DispatchWhen.BEFORE
        arrays = [self.runner.read_buffer_view(bv) for bv in buffer_views]
        ordinal, inputs = self._pairing.take(head, kind, arrays)
        hit = [b for b in self.breakpoints if dispatch_matches(b, ordinal, executable, export, when)]
        nonfinite: list = []
        if when == DispatchWhen.AFTER and any(b.kind == BreakpointKind.NAN for b in self.breakpoints):
            nonfinite = self._nonfinite_written(export, arrays, inputs)
        nan = [f.binding for f in nonfinite]
        step = self._stop_at_next and when == DispatchWhen.BEFORE
        if not (hit or nan or step):
            return
        self._stop_at_next = False
        access = "write" if when == DispatchWhen.AFTER else "read"
        bindings = tuple(
            BindingInfo(k, f"{kind}[{k}]", 0, int(a.nbytes), access) for k, a in enumerate(arrays)
        )
        self._info = DispatchInfo(ordinal, executable, export, (0, 0, 0), (), bindings, when, self.runner.device_uri)
        self._arrays = arrays
        self._declared = [_packed_type(bv) for bv in buffer_views]
        role = "output" if when == DispatchWhen.AFTER else "input"
        described = tuple(
            TensorDescriptor(binding_label(k, access, role, k), role, k, k, access, _element(a), tuple(a.shape), 0,
                             int(a.nbytes), TypeSource.RUNTIME)  # fmt: skip
            for k, a in enumerate(arrays)
        )
        if nan:  # the NaN breakpoint stopped it too (a script's "never stopped at" note reads these)
            hit += [b for b in self.breakpoints if b.kind == BreakpointKind.NAN]
        detail = StopDetail(
            breakpoints=tuple(b.describe() for b in hit), nan_bindings=tuple(nan), nonfinite=tuple(nonfinite),
            tensors=described,
        )
        self.emit(Stopped(StopReason.DISPATCH, self._location(), detail))
        try:
            command = self.run.park()  # raises Abandoned when the client gives the run up
        finally:
            self._info = None
        if isinstance(command, Step):
            self._stop_at_next = True

    # -- helpers

    def _need_parked(self) -> None:
        if not self.run.parked:
            raise ReferenceSessionError("no call is paused at a dispatch")

    def _location(self) -> Location:
        info = self._info
        if info is None:
            return Location()
        return Location((), info.export, info.ordinal, info)

    def _dispatch(self) -> DispatchInfo | None:
        return self._info if self.run.parked else None

    def _binding(self, index: int) -> TensorRef:
        self._need_parked()
        if not 0 <= index < len(self._arrays):
            raise ReferenceSessionError(f"binding {index} out of range: the trace point has {len(self._arrays)}")
        a = np.asarray(self._arrays[index], order="C")  # a rank-0 tensor stays rank 0
        return TensorRef(a.shape, a.dtype.str, "", array=a)

    def _bindings(self) -> list[TensorRef]:
        self._need_parked()
        return [self._binding(k) for k in range(len(self._arrays))]


def _packed_type(buffer_view) -> str:
    """The type a traced buffer view's bytes hold where IREE packs it (``64x16xi4``; a packed i1 with IREE's
    ``packed_storage`` encoding, as an executable's source spells it), else "": the window unpacks those."""
    element = ElementType(int(buffer_view.element_type))
    if not element.packed:
        return ""
    text = "x".join([*(str(int(d)) for d in buffer_view.shape), element.name])
    return f"{text}, #iree_encoding.packed_storage" if element.numerical_type == BOOLEAN else text

