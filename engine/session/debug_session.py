"""The debug session: one program in our VM and emulated HAL, driven by protocol commands.

``DebugSession(emit)`` follows the handler shape that ``InProcessSession`` and ``ChildSession`` run:
``handle(command)`` executes one command and reports through ``emit(event)``; ``pause()`` may be called
from any thread; ``close()`` abandons a paused run. Everything it emits is plain data
(``engine.session.protocol``).

Two threads. The program runs on a *run thread*; ``handle`` (the command loop) starts or resumes it and
returns once it stops or ends, so commands stay strictly ordered. The HAL runs each dispatch on the run
thread and tells the ``DispatchGate`` before and after; at a dispatch breakpoint the gate *parks* the run
thread inside that native call (``Stopped(reason="dispatch")``) and the command loop keeps serving
commands: queries (``ReadRegisters``, ``ReadDispatch``, ``ReadBindings``...), ``SetBreakpoints``, and the command
that resumes the run (``Continue``, ``Step``, ``RunTo``). A resumed ``Step`` first finishes the native
call the dispatch ran in (one step), then steps on, so ``Step(count=N)`` executes exactly N instructions.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from engine.dispatch.rebuild_sources import SessionSources
from engine.dispatch.snapshot import DispatchSnapshots
from engine.dispatch.spirv_hazards import partial_subgroup_warning
from engine.dispatch.tensor_types import to_storage
from engine.errors import FrameLocation, LensError
from engine.runtime.debug_runner import DebugRunError, DebugRunner
from engine.runtime.function_io import Tensor, format_results, parse_inputs, split_cconv
from engine.runtime.hal.device import DispatchRecord
from engine.runtime.hal.executable_plugins import register_plugins
from engine.runtime.module_dependencies import found_beside
from engine.runtime.parameters import ParameterArchives
from engine.runtime.vm import controller as vmc
from engine.runtime.vm.context import ModuleInstance
from engine.runtime.vm.trace import describe_ref, format_instruction
from engine.runtime.vmfb.global_names import calls_leave_state
from engine.session.dispatch_gate import (
    DispatchGate,
    GateStop,
    is_dispatch_breakpoint,
    module_dispatch_names,
    unmatchable,
)
from engine.session.parked_run import ParkedRun, RunState
from engine.session.protocol import (
    BATCH_IDS_LIVE,
    BREAKPOINT_REFUSED,
    INITIALIZER,
    SUBSTITUTION_QUERIES,
    Answer,
    BindingBytes,
    Bindings,
    Breakpoint,
    BreakpointKind,
    Call,
    Command,
    Continue,
    DispatchInfo,
    DispatchTensor,
    Event,
    Failed,
    Finished,
    FrameInfo,
    Frames,
    GlobalBuffer,
    Globals,
    Location,
    Log,
    Open,
    Opened,
    PausedDispatch,
    Progress,
    Query,
    ReadBinding,
    ReadBindings,
    ReadDispatch,
    ReadFrames,
    ReadGlobalBuffer,
    ReadGlobals,
    ReadRegisters,
    ReadTensors,
    RefusedBreakpoint,
    RegisterFile,
    Registers,
    RunTo,
    SetBreakpoints,
    Step,
    StepMode,
    StopDetail,
    Stopped,
    StopReason,
    TensorDescriptor,
    TensorRef,
    Tensors,
)
from engine.session.session_globals import GlobalsError, SessionGlobals
from engine.session.undefined_bytes import UndefinedBytesWatch
from engine.substitute.live import LiveSubstitutions
from engine.substitute.session_queries import answer as answer_substitution


class DebugSession:
    def __init__(self, emit: Callable[[Event], Any]):
        self.emit = emit
        self.runner: DebugRunner | None = None
        self.controller: vmc.Controller | None = None
        self.gate: DispatchGate | None = None
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self._installed: dict[object, Breakpoint] = {}  # VM controller breakpoint -> the Breakpoint set
        self._function: str | None = None
        # Opened with the initializer left to a call (Open.initializer) that has not finished: no other
        # function can be called yet; started: a call of it began (another call of it opens the module afresh).
        self._initializer_pending = False
        self._initializer_started = False
        self._opened_with: Open | None = None
        self.globals: SessionGlobals | None = None  # the opened module's globals, made at the first question
        self._result_kinds = ""
        self._signal_fence = None  # the current call's, when it is an async-external function's
        self._results_text = True  # the current call's ``Call.results_text``
        self.run = ParkedRun()  # the run thread, parked inside a dispatch while the command loop serves
        self._resumed: Command | None = None  # the latest command that resumed the current action
        self._code_pcs: dict[tuple[int, int], list[int]] = {}
        self._frame_infos: dict[tuple[ModuleInstance, int, int], FrameInfo] = {}
        self._inputs_memo: tuple[tuple, list] | None = None  # the last call's parsed inputs
        self._dispatch_names: tuple[tuple[str, ...] | None] | None = None  # the module's (worked out once)
        # Per planned batch (its dispatches tuple, kept so its id is not reused): (batch_id, names); the names
        # go with the first Progress of an id only (``Progress.batch_id``).
        self._batch_ids: dict[int, tuple[object, int, tuple[str, ...]]] = {}
        self._next_batch_id = 1
        # A Progress before each dispatch says what ran when a kernel takes the process down; a transport
        # that drops them (in process, nobody asked) says so and saves building a location per dispatch.
        self.report_progress = True
        # Where the device keeps which dispatch of a native batch runs: shared memory a child session's parent
        # reads when a kernel takes the process down (``child.py`` sets it); None: the device's own.
        self.progress_cell: np.ndarray | None = None
        # A binding's answer is a copy: an in-process client keeps it while the run goes on and writes the
        # buffer. A transport that sends each answer before the next command runs (the stream server) sets
        # this False: the buffer's own bytes are sent, with no copy of a 1 GiB tensor first.
        self.copy_answers = True
        self._handlers: dict[type, Callable[[Any], None]] = {
            Open: self._on_open,
            SetBreakpoints: self._on_set_breakpoints,
            Call: self._on_call,
            Step: self._on_step,
            Continue: self._on_continue,
            RunTo: self._on_run_to,
        }
        self._queries: dict[type[Query], Callable[[Any], Answer]] = {
            ReadRegisters: lambda q: Registers(q, self._registers(q.depth)),
            ReadGlobals: self._globals,
            ReadGlobalBuffer: self._global_buffer,
            ReadFrames: lambda q: Frames(q, self._frames()),
            ReadDispatch: lambda q: PausedDispatch(q, self._dispatch_info()),
            ReadBinding: lambda q: BindingBytes(q, q.index, self._binding(q.index)),
            ReadBindings: lambda q: Bindings(q, tuple(self._bindings())),
            ReadTensors: self._tensors,
        }
        # Hot substitution of executables (engine.substitute), answered for the paused dispatch.
        for kind in SUBSTITUTION_QUERIES:
            self._queries[kind] = self._substitution
        self.live: LiveSubstitutions | None = None
        self.sources: SessionSources | None = None  # the executables' sources that type tensors
        self.snapshots: DispatchSnapshots | None = None  # the device's one snapshot observer
        self.park_reason: StopReason | None = None  # the reason of the next dispatch stop, when not its own
        # The breakpoints a reverse-continue found at the place the next dispatch stop parks at.
        self.park_breakpoints: tuple[Breakpoint, ...] = ()

    # ---------------------------------------------------------------------------------------- commands

    @property
    def state(self) -> RunState:
        return self.run.state

    def handle(self, command: Command) -> None:
        handler = self._on_query if isinstance(command, Query) else self._handlers.get(type(command))
        if handler is None:
            self.emit(Failed(f"unknown command {type(command).__name__}"))
            return
        try:
            handler(command)
        except LensError as e:
            self.emit(Failed(str(e), getattr(e, "status", None), self.location()))

    def pause(self) -> None:
        if self.controller is not None:
            self.controller.pause()

    def close(self) -> None:
        """Abandon a parked run, end the run thread and stop a rebuild of the sources."""
        self.abandon_run()
        self.run.close()
        if self.sources is not None:
            self.sources.close()

    # -- seams for sessions built on this one (TimeTravelSession)

    def register_command(self, kind: type[Command], handler: Callable[[Any], None]) -> None:
        """Handle commands of type ``kind`` with ``handler(command)`` (on the command loop)."""
        self._handlers[kind] = handler

    def register_query(self, kind: type[Query], answer: Callable[[Any], Answer]) -> None:
        """Answer queries of type ``kind`` with ``answer(query)`` (on the command loop)."""
        self._queries[kind] = answer

    def on_opened(self) -> None:
        """Called once a module is open (runner, controller and gate exist), before ``Opened`` is sent."""

    def stop_detail(self) -> StopDetail:
        """What every stop reports besides its location (a subclass adds to it)."""
        return StopDetail(registers=self._registers())

    def _on_open(self, command: Open) -> None:
        self.abandon_run()
        self._opened_with = command
        self.globals = None  # the new module's, made at the first question
        if self.sources is not None:  # the previous module's rebuild is of no use now
            self.sources.close()
        parameters = ParameterArchives.open_given(command.parameters)
        register_plugins(command.executable_plugins)  # the process's, as IREE's flag: kept for later opens
        self.runner = DebugRunner(command.module_path, command.device, parameters=parameters,
                                  run_init=not command.initializer, modules=command.modules)
        loaded_dispatches = self.runner.device.dispatch_count  # the initializer's, as the module loaded
        for line in found_beside(self.runner):
            self.emit(Log(line))
        self._initializer_pending = command.initializer and self.runner.has_initializer
        self._initializer_started = False
        if command.initializer and not self.runner.has_initializer:
            self.emit(Log(f"{self.runner.module.name} has no initializer (__init): its functions can be called now"))
        warning = partial_subgroup_warning(self.runner.module, self.runner.device.subgroup_size, self.runner.device.name)
        if warning:  # a build for a GPU with larger subgroups: said before its results are believed
            self.emit(Log(f"warning: {warning}"))
        self._dispatch_names = None
        self.controller = vmc.Controller(self.runner.context)
        controller = self.controller
        self.gate = DispatchGate(
            self._park,
            controller.take_pause,
            self._progress,
            pause_pending=lambda: controller.pause_requested,
            batch_progress=self._batch_progress,
            # Progress read by a client that cannot read the device's progress cell: one per dispatch.
            progress_per_dispatch=lambda: self.report_progress and self.progress_cell is None,
        )
        self.gate.parameters = parameters  # a break diverge module reference loads the same weights
        # A break diverge reference of a program that keeps state is run through the same earlier calls.
        try:
            self.gate.calls_leave_state = calls_leave_state(self.runner.module)
        except LensError:  # code that does not decode: the run traps there and says so
            self.gate.calls_leave_state = False
        if self.progress_cell is not None:
            self.runner.device.set_progress_cell(self.progress_cell)
        snapshots = self.snapshots = DispatchSnapshots.for_device(self.runner.device)
        tell = lambda text: self.emit(Log(text, about="sources"))  # noqa: E731
        self.sources = SessionSources(command.module_path, command.sources, command.rebuild_sources, tell, snapshots)
        if command.wait_for_sources:
            self.sources.ensure()
            self.sources.wait()
        snapshots.subscribe(self.gate)
        # Told before the gate (which parks the run): what the stopped dispatch's in-place tensors lack.
        self.undefined_bytes = UndefinedBytesWatch(lambda: snapshots.sources)
        snapshots.subscribe(self.undefined_bytes, first=True)
        self.undefined_bytes.follow_transfers(self.runner.device, self.sources.may_come)
        self.live = LiveSubstitutions.for_runner(self.runner)
        self._install_breakpoints()
        self.on_opened()
        initializer = (INITIALIZER,) if self._initializer_pending else ()
        self.emit(Opened(command.module_path, (*initializer, *self.runner.function_names), command.device,
                         loaded_dispatches))

    def _on_set_breakpoints(self, command: SetBreakpoints) -> None:
        refused = self._refused(command.breakpoints) if self.controller is not None else {}
        self.breakpoints = tuple(b for b in command.breakpoints if b not in refused)
        if self.controller is not None:
            self._install_breakpoints()
        if refused:  # the others are set; these could never stop a run
            reasons = tuple(RefusedBreakpoint(b, why) for b, why in refused.items())
            self.emit(Failed("; ".join(refused.values()), BREAKPOINT_REFUSED, refused=reasons))

    def _refused(self, breakpoints: tuple[Breakpoint, ...]) -> dict[Breakpoint, str]:
        """The breakpoints that can never match this module, each with the reason: a dispatch name no
        dispatch has, a VM function it lacks, a pc that starts none of that function's instructions, a
        diverge reference that is not a capture bundle or a module."""
        from engine.dispatch.diverge_condition import DivergeError

        if self._dispatch_names is None:
            self._dispatch_names = (module_dispatch_names(self.runner.module),)
        refused: dict[Breakpoint, str] = {}
        for bp in breakpoints:
            problem = unmatchable(bp, self._dispatch_names[0], os.path.basename(self.runner.module_path))
            if problem is None and bp.kind in (BreakpointKind.FUNCTION, BreakpointKind.INSTRUCTION):
                problem = self._unresolvable(bp)
            if problem is None and bp.kind == BreakpointKind.DIVERGE:
                try:
                    self.gate.check_reference(bp)
                except DivergeError as e:
                    problem = str(e)
            if problem is not None:
                refused[bp] = problem
        return refused

    def _unresolvable(self, bp: Breakpoint) -> str | None:
        """Why a function or instruction breakpoint names no instruction of the program (None: it does)."""
        installed = self._vm_breakpoint(bp)
        if installed is None:
            return None
        spelled = f"break function {bp.function}" if bp.kind == BreakpointKind.FUNCTION else f"break pc {bp.function}:{bp.pc:#x}"
        try:
            if self.controller.resolve(installed):
                return None
        except KeyError:
            pass  # no such function: said below, as for a function breakpoint
        except LensError:  # the function is there, the pc starts none of its instructions
            return f"{spelled}: {bp.pc:#x} is not the pc of an instruction of {bp.function} ({self._nearest_pcs(bp)})"
        instances = self.controller.instances  # the program's, and the modules' it calls
        several = len(instances) > 1  # each function named with its module
        names = [f"{inst.name}.{f.name}" if several else f.name
                 for inst in instances if bp.module in (None, inst.name) for f in inst.functions]  # fmt: skip
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        module = os.path.basename(self.runner.module_path)
        return f"{spelled}: no function of {module} is named so (its functions: {shown or 'none'})"

    def _nearest_pcs(self, bp: Breakpoint) -> str:
        """The pcs of the instructions around ``bp.pc`` in its function, to correct a pc by."""
        module = bp.module or self.runner.module.name
        for inst in self.controller.instances:
            if inst.name == module:
                pcs = sorted(inst.instructions(inst.function_ordinal(bp.function)))
                k = bisect.bisect_left(pcs, bp.pc)
                if k >= len(pcs):
                    return f"its last instruction is at {pcs[-1]:#x}"
                return "the nearest: " + ", ".join(f"{pc:#x}" for pc in pcs[max(k - 1, 0) : k + 1])
        return "see its disassembly"

    def _vm_breakpoint(self, bp: Breakpoint) -> vmc.Breakpoint | None:
        """The VM controller's breakpoint of a session breakpoint (None: the gate's, or incomplete)."""
        if bp.kind == BreakpointKind.INSTRUCTION and bp.function is not None and bp.pc is not None:
            return vmc.InstructionBreakpoint(bp.module or self.runner.module.name, bp.function, bp.pc)
        if bp.kind == BreakpointKind.FUNCTION and bp.function:
            module, function = (bp.module, bp.function) if bp.module else self._module_and_function(bp.function)
            return vmc.FunctionBreakpoint(function, module)
        if bp.kind == BreakpointKind.IMPORT and bp.import_name:
            return vmc.ImportBreakpoint(bp.import_name)
        return None

    def _module_and_function(self, name: str) -> tuple[str | None, str]:
        """``module_a.abs`` -> (``module_a``, ``abs``) when a module of the context (a compiled module the
        program calls) has that name; else (None, ``name``): a function of any module."""
        prefix, _, rest = name.partition(".")
        instances = self.controller.instances if self.controller is not None else ()
        if rest and any(inst.name == prefix for inst in instances):
            return prefix, rest
        return None, name

    def _on_call(self, command: Call) -> None:
        self.abandon_run()
        self._need_runner()
        self._ready_for(command.function)
        runner = self.runner
        arg_kinds, self._result_kinds = split_cconv(runner.cconv(command.function))
        args = self._parsed_inputs(tuple(command.inputs), arg_kinds)
        vm_args, self._signal_fence = runner.vm_arguments(command.function, args)
        runner.context.interpreter.reset()
        self.gate.begin_call(runner.device.dispatch_count, command.function, tuple(command.inputs))
        self.undefined_bytes.begin_call(runner.device, self.sources.may_come)
        self._function = command.function
        self._results_text = command.results_text
        runner.context.begin_call(command.function, vm_args)
        if command.stop_at_entry:
            self.emit(Stopped(StopReason.ENTRY, self.location(), self.stop_detail()))
        else:
            self.start_run(self.controller.continue_from_entry)  # a breakpoint at the entry stops it there

    def _on_step(self, command: Step) -> None:
        try:
            mode = StepMode(command.mode)
        except ValueError:
            raise DebugRunError(
                f"unknown step mode {command.mode!r} ({', '.join(m.value for m in StepMode)})"
            ) from None
        if command.count < 1:
            raise DebugRunError(f"a step count is at least 1 (got {command.count})")
        if self.run.parked:
            self._resume_with(command)
            return
        self.need_controller()
        self.start_run(lambda: self._steps(mode, command.count))

    def _on_continue(self, command: Continue) -> None:
        if self.run.parked:
            self._resume_with(command)
            return
        self.start_run(self.need_controller().continue_)

    def _on_run_to(self, command: RunTo) -> None:
        if self.run.parked:
            self._resume_with(command)
            return
        controller = self.need_controller()
        self.start_run(lambda: controller.run_to(self.runner.module.name, command.function, command.pc))

    def _on_query(self, query: Query) -> None:
        answer = self._queries.get(type(query))
        if answer is None:
            known = ", ".join(sorted(k.__name__ for k in self._queries))
            raise DebugRunError(f"this session does not answer {type(query).__name__} (it answers {known})")
        self.emit(answer(query))

    # --------------------------------------------------------------------------------- the run thread

    def start_run(self, action: Callable[[], vmc.StopEvent]) -> None:
        """Run ``action`` on the run thread; return once it parks at a dispatch or ends (its events are out)."""
        self.run.start(lambda: self._run(action))

    def _resume_with(self, command: Command) -> None:
        self.run.resume(command)

    def _parsed_inputs(self, inputs: tuple[str, ...], arg_kinds: str) -> list:
        """``parse_inputs``, remembered for the same inputs (files unchanged): a debugger reruns a call again
        and again, and reading a ``.npy`` costs more than running a small program. The values are copied
        into the device's buffers at every call (``DebugRunner.to_vm``), so one parse serves them all."""
        key = (inputs, arg_kinds, tuple(_file_stamp(spec) for spec in inputs))
        if self._inputs_memo is not None and self._inputs_memo[0] == key:
            return self._inputs_memo[1]
        values = parse_inputs(list(inputs), arg_kinds)
        self._inputs_memo = (key, values)
        return values

    def abandon_run(self) -> None:
        """Unwind a run parked inside a dispatch (its thread ends); nothing when none is parked."""
        self.run.abandon()

    def _run(self, action: Callable[[], vmc.StopEvent]) -> None:
        try:
            self._resumed = None
            stop = action()
            while self._resumed is not None:
                command, self._resumed = self._resumed, None
                stop = self._after_resume(command, stop)
            self._report(stop)
        except LensError as e:
            self.emit(Failed(str(e), getattr(e, "status", None), self.location()))
        except Exception as e:  # a bug must end the run with a message, not leave the client waiting
            self.emit(Failed(f"{type(e).__name__}: {e}", None, self.location()))
        finally:
            if self.controller is not None:
                self.controller.clear_stop_targets()
            if self.gate is not None:
                self.gate.current = None
                self.gate.current_info = None

    def _steps(self, mode: StepMode, count: int) -> vmc.StopEvent:
        """``count`` steps (a dispatch stop inside one, or a step that ends where a breakpoint is set, ends them
        early, as gdb's ``step N``; the stop's ``steps`` says how many)."""
        c = self.controller
        if mode == StepMode.DISPATCH:
            self.gate.stop_at_next = True
            return c.continue_()
        action = {StepMode.INTO: c.step_into, StepMode.OVER: c.step_over, StepMode.OUT: c.step_out}[mode]
        stop = action()
        for _ in range(count - 1):
            if stop.reason != "step" or stop.breakpoints or self._resumed is not None:
                break
            stop = action()
        return stop

    def _after_resume(self, command: Command, stop: vmc.StopEvent) -> vmc.StopEvent:
        """Carry on with the command that resumed a parked run, once the action it parked in returned."""
        c = self.controller
        c.clear_stop_targets()
        if stop.reason != "step":  # the program ended, trapped, paused or hit a breakpoint: report that
            return stop
        if isinstance(command, Continue):
            return c.continue_()
        if isinstance(command, RunTo):
            return c.run_to(self.runner.module.name, command.function, command.pc)
        mode = StepMode(command.mode)
        if mode == StepMode.DISPATCH:
            return c.continue_()
        if mode == StepMode.OUT:
            return c.step_out()
        # Finishing the native call the dispatch ran in was the first step (where a breakpoint is set: the stop).
        return self._steps(mode, command.count - 1) if command.count > 1 and not stop.breakpoints else stop

    def _park(self, record: DispatchRecord, info: DispatchInfo, why: GateStop) -> None:
        """On the run thread, inside a dispatch: report the stop and wait for the command that resumes."""
        reason = StopReason.PAUSED if why.paused and not (why.breakpoints or why.step) else StopReason.DISPATCH
        if self.park_reason is not None:  # a reverse step that ends inside a dispatch is a step
            reason = self.park_reason
        detail = replace(
            self.stop_detail(),
            breakpoints=tuple(dict.fromkeys(b.describe() for b in (*why.breakpoints, *self.park_breakpoints))),
            nan_bindings=tuple(why.nan_bindings),
            nonfinite=tuple(why.nonfinite),
            divergence=why.divergence,
            tensors=self._described_tensors(),
        )
        self.emit(Stopped(reason, self.location(), detail))
        command = self.run.park()  # raises Abandoned when the client gives the run up
        self._resumed = command
        c = self.controller
        c.clear_stop_targets()
        if isinstance(command, Step) and command.mode == StepMode.DISPATCH:
            self.gate.stop_at_next = True
        elif not isinstance(command, Continue):
            # Stop right after the native call this dispatch runs in (pc: where the caller resumes).
            top = self.runner.context.interpreter.top
            if top is not None:
                c.add_stop_target(top.instance, top.ordinal, top.pc)

    def _described_tensors(self) -> tuple[TensorDescriptor, ...]:
        """The stopped dispatch's typed tensors, described (``engine.dispatch.typed_tensors``: views, no
        copies), for the stop's one record."""
        snapshot = self.gate.snapshot if self.gate is not None else None
        if snapshot is None:
            return ()
        return tuple(
            TensorDescriptor(t.binding_label, str(t.role), t.position, t.binding, t.access, t.type.element,
                             tuple(int(d) for d in t.type.shape), t.offset, t.length, str(t.provenance))  # fmt: skip
            for t in snapshot.shown_tensors()
        )

    def _progress(self, record: DispatchRecord) -> None:
        if self.report_progress:
            self.emit(Progress(self.location()))

    def _batch_progress(self, first_ordinal: int, dispatches) -> None:
        if not self.report_progress:
            return
        known = self._batch_ids.get(id(dispatches))
        if known is not None and known[0] is dispatches:
            self.emit(Progress(self.location(), batch_first=first_ordinal, batch_id=known[1]))
            return
        if len(self._batch_ids) >= BATCH_IDS_LIVE:  # stops moving around: number them afresh
            self._batch_ids.clear()
        names = tuple(d.executable.export_name(d.ordinal) for d in dispatches)
        batch_id = self._next_batch_id
        self._next_batch_id += 1
        self._batch_ids[id(dispatches)] = (dispatches, batch_id, names)
        self.emit(Progress(self.location(), batch=names, batch_first=first_ordinal, batch_id=batch_id))

    # ------------------------------------------------------------------------------------------ helpers

    def _ready_for(self, function: str) -> None:
        """A module opened with its initializer left to a call runs it first. The initializer called once it ran
        or began (on opening, or called before, finished or not) runs on the module opened afresh with it left
        to the call (Opened again): as IREE runs it, once, on globals it has not set."""
        if function == INITIALIZER and self.runner.has_initializer:
            if self._initializer_started or not self._initializer_pending:
                self._on_open(replace(self._opened_with, initializer=True))
            self._initializer_started = True
            return
        if self._initializer_pending:
            raise DebugRunError(f"the module's initializer ({INITIALIZER}) has not run, so its globals are not set: "
                                f"call {INITIALIZER} first (the module was opened to debug its initializer)")

    def _need_runner(self) -> DebugRunner:
        if self.runner is None:
            raise DebugRunError("no module is open")
        return self.runner

    def need_controller(self) -> vmc.Controller:
        self._need_runner()
        if self.runner.context.interpreter.finished:
            raise DebugRunError("no call in progress: start one first")
        return self.controller

    def _install_breakpoints(self) -> None:
        c = self.controller
        for bp in c.breakpoints:
            c.remove_breakpoint(bp)
        self._installed = {}
        for bp in self.breakpoints:
            installed = self._vm_breakpoint(bp)
            if installed is not None:
                c.add_breakpoint(installed)
                self._installed.setdefault(installed, bp)
        self.gate.breakpoints = tuple(bp for bp in self.breakpoints if is_dispatch_breakpoint(bp))

    def describe_hits(self, hits: Iterable[object]) -> tuple[str, ...]:
        """The breakpoints the VM controller stopped at, described as the session's ``Breakpoint`` they were
        set as (``Breakpoint.describe``: one description in every stop report and list)."""
        return tuple(self._installed[b].describe() if b in self._installed else str(b) for b in hits)

    def _report(self, stop: vmc.StopEvent) -> None:
        if stop.reason == "done":
            runner = self.runner
            try:
                runner.finish_call(self._function or "", self._signal_fence)
            except DebugRunError as e:
                self.emit(Failed(str(e), e.status, self.location()))
                return
            values = [runner.from_vm(kind, v) for kind, v in zip(self._result_kinds, stop.results or [])]
            outputs = tuple(
                TensorRef(v.shape, v.array.dtype.str, v.element_type.name, array=v.array)
                for v in values
                if isinstance(v, Tensor)
            )
            text = format_results(values) if self._results_text else ""
            verdicts = self.gate.diverge_verdicts() if self.gate is not None else ()
            exports = self.gate.diverge_exports() if self.gate is not None else ()
            if self._function == INITIALIZER:
                self._initializer_pending = False  # the module's globals are set: its functions can be called
            if self.gate is not None:
                self.gate.end_call()
            self.emit(Finished(self._function or "", text, outputs, verdicts, exports))
        elif stop.reason == "trap":
            trap = stop.trap
            self.emit(Failed(trap.describe(), trap.code.name, self.location(trap.stack)))
        else:
            import_call = None
            if stop.record is not None and stop.record.import_call is not None:
                import_call = stop.record.import_call.name
            reason, hits = StopReason(stop.reason), tuple(stop.breakpoints)
            if reason == StopReason.STEP and not hits and self.controller is not None:
                hits = self.controller.breakpoints_at(self.runner.context.interpreter)
            if reason == StopReason.STEP and hits:
                # A step, next or finish that ends where a breakpoint is set stops at that breakpoint (gdb:
                # "Breakpoint 2, ..."), as a continue to it would.
                reason = StopReason.BREAKPOINT
            detail = replace(
                self.stop_detail(),
                import_call=import_call,
                breakpoints=self.describe_hits(hits),
                steps=stop.steps,
            )
            self.emit(Stopped(reason, self.location(), detail))

    # ---------------------------------------------------------------------------------------- snapshots

    def location(self, stack: tuple[FrameLocation, ...] | None = None) -> Location:
        frames: list[FrameInfo] = []
        record = self.gate.current if self.gate is not None else None
        if self.runner is not None:
            interpreter = self.runner.context.interpreter
            live = interpreter.frames[interpreter.base :] if stack is None else []
            for k, frame in enumerate(live):
                pc = frame.pc
                if record is not None and k == len(live) - 1:
                    pc = self.call_pc(frame.instance, frame.ordinal, pc)  # inside the call that dispatches
                frames.append(self.frame_info(frame.instance, frame.ordinal, pc))
            for loc in stack or ():
                frames.append(
                    FrameInfo(getattr(loc, "module", ""), getattr(loc, "function", ""), getattr(loc, "pc", 0))
                )
        if record is None:
            return Location(tuple(frames))
        info = self.gate.current_info
        return Location(tuple(frames), record.export_name, self.gate.ordinal(record), info)

    def call_pc(self, instance: ModuleInstance, ordinal: int, resume: int) -> int:
        """The pc of the instruction before ``resume`` (the call a native function runs in)."""
        key = (id(instance), ordinal)
        pcs = self._code_pcs.get(key)
        if pcs is None:
            pcs = self._code_pcs[key] = sorted(instance.instructions(ordinal))
        k = bisect.bisect_left(pcs, resume)
        return pcs[k - 1] if k > 0 else resume

    def frame_info(self, instance: ModuleInstance, ordinal: int, pc: int) -> FrameInfo:
        # Cached: every dispatch reports its location (Progress), mostly from the same few call sites.
        key = (instance, ordinal, pc)
        found = self._frame_infos.get(key)
        if found is None:
            try:
                text = format_instruction(instance.instruction_at(ordinal, pc))
            except LensError:
                text = ""
            if len(self._frame_infos) > 4096:
                self._frame_infos.clear()
            found = self._frame_infos[key] = FrameInfo(
                instance.name, instance.function_name(ordinal), pc, text, ordinal
            )
        return found

    def _frames(self) -> tuple[FrameInfo, ...]:
        return self.location().frames

    def _registers(self, depth: int = -1) -> RegisterFile:
        """The registers of a frame (innermost by default): i32 words and ref descriptions."""
        interpreter = self._need_runner().context.interpreter
        frames = interpreter.frames[interpreter.base :]
        if not frames:
            return RegisterFile()
        try:
            frame = frames[depth]
        except IndexError:
            raise DebugRunError(f"no frame {depth}: the call has {len(frames)}") from None
        return RegisterFile(tuple(int(w) for w in frame.i), tuple(describe_ref(r) for r in frame.r))

    def _globals(self, query: ReadGlobals) -> Globals:
        return self._need_globals().answer(query)

    def _global_buffer(self, query: ReadGlobalBuffer) -> GlobalBuffer:
        try:
            return self._need_globals().buffer(query, copy=self.copy_answers)
        except GlobalsError as e:
            raise DebugRunError(str(e)) from None

    def _need_globals(self) -> SessionGlobals:
        runner = self._need_runner()
        if self.globals is None:
            sources = self.sources
            rebuilt = lambda: sources.sources.folder if sources is not None else None  # noqa: E731
            self.globals = SessionGlobals(
                self._opened_with.module_path, runner.context.main, rebuilt, runner.storage_owner
            )
        return self.globals

    # -- the paused dispatch (served while the run thread is parked)

    def _paused_record(self) -> DispatchRecord:
        record = self.gate.current if self.gate is not None else None
        if record is None or not self.run.parked:
            raise DebugRunError("no dispatch is paused: stop at one first (a dispatch breakpoint)")
        return record

    def _dispatch_info(self) -> DispatchInfo | None:
        if self.gate is None or not self.run.parked:
            return None
        return self.gate.current_info

    def _binding(self, index: int) -> TensorRef:
        """The bytes of binding ``index`` of the paused dispatch now (before or after it ran)."""
        record = self._paused_record()
        if not 0 <= index < len(record.bindings):
            raise DebugRunError(f"binding {index} out of range: the dispatch has {len(record.bindings)}")
        data = record.bindings[index].data
        if self.copy_answers:
            data = np.array(data, copy=True)
        return TensorRef(data.shape, data.dtype.str, "u8", array=data)

    def _substitution(self, query: Query) -> Answer:
        """A substitution query, answered for the paused dispatch (if any)."""
        if self.live is None:
            raise DebugRunError("no module is open")
        return answer_substitution(self.live, query, self.gate.current if self.gate else None)

    def _bindings(self) -> list[TensorRef]:
        return [self._binding(k) for k in range(len(self._paused_record().bindings))]

    def _tensors(self, query: ReadTensors) -> Tensors:
        """The paused dispatch's tensors, typed here once (``engine.dispatch.typed_tensors``: the executables'
        sources, else exactly the bound bytes), each labelled with where its type came from."""
        try:
            self._paused_record()
        except DebugRunError:
            if query.refresh:
                return Tensors(query, None, ())  # the run moved on from the stop the client shows
            raise
        self.sources.ensure()  # no sources: rebuild them from the program the module names (once, on a thread)
        if query.wait_for_sources:
            self.sources.wait()
        snapshot = self.gate.snapshot
        undefined = self.undefined_bytes.at(snapshot) if snapshot is not None else None
        held = self._global_holding(self._paused_record())
        tensors = tuple(
            DispatchTensor(
                t.binding,
                t.access,
                _tensor_ref(t.array, t.type.element, self.copy_answers),
                t.provenance,
                t.note,
                t.role,
                t.position,
                t.offset,
                t.length,
                t.written,
                (undefined or {}).get(f"{t.role}{t.position}", ())
                if undefined is not None or t.access != "readwrite" else None,
                t.declared,
                held(t.binding, t.offset, t.length),
            )
            for t in (snapshot.shown_tensors() if snapshot is not None else ())
        )
        return Tensors(query, self.gate.current_info, tensors)

    def _global_holding(self, record: DispatchRecord) -> Callable[[int, int, int], str]:
        """``(binding, offset, length) -> "@state"``: the global whose buffer holds those bytes of the paused
        dispatch's binding ("" for none)."""
        holders = self._need_globals().holders()
        bound = {b.index: b for b in record.bindings}

        def held(binding: int, offset: int, length: int) -> str:
            b = bound.get(binding)
            if b is None or not holders:
                return ""
            try:
                start, _ = b.buffer.resolve(b.offset, b.length)
            except Exception:  # an invalid range: the dispatch reports it
                return ""
            first, end = start + offset, start + offset + max(length, 1)
            for allocation, g_start, g_end, name in holders:
                if allocation is b.buffer.allocation and first < g_end and g_start < end:
                    return name
            return ""

        return held


def _tensor_ref(array: np.ndarray, element: str, copy: bool = True) -> TensorRef:
    """``array`` (a copy unless ``copy`` is False) to send; bf16/f8 travel as their bits
    (``tensor_types.from_storage`` undoes it)."""
    stored = np.array(to_storage(array), copy=True) if copy else np.asarray(to_storage(array), order="C")
    return TensorRef(stored.shape, stored.dtype.str, element, array=stored)


def _file_stamp(spec: str) -> tuple[int, int] | None:
    """The size and modification time of the file an ``--input`` names (``@path``, ``shape=@path``)."""
    if "@" not in spec:
        return None
    try:
        st = os.stat(spec.rsplit("@", 1)[1])
    except (OSError, ValueError):
        return None
    return st.st_size, st.st_mtime_ns
