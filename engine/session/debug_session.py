"""The debug session: one program in our VM and emulated HAL, driven by protocol commands.

``DebugSession(emit)`` follows the handler shape that ``InProcessSession`` and ``ChildSession`` run:
``handle(command)`` executes one command synchronously and reports through ``emit(event)``;
``pause()`` may be called from any thread. Everything it emits is plain data (``engine.session.protocol``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from engine.errors import LensError
from engine.runtime.function_io import Tensor, format_results, parse_inputs, split_cconv
from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.runtime.vm import controller as vmc
from engine.runtime.vm.context import ModuleInstance
from engine.runtime.vm.interpreter import FrameLocation
from engine.runtime.vm.trace import describe_ref, format_instruction
from engine.session.debug_run import DebugRunError, DebugRunner
from engine.session.protocol import (
    Answer,
    Breakpoint,
    Call,
    Command,
    Continue,
    Evaluate,
    Event,
    Failed,
    Finished,
    FrameInfo,
    Location,
    Open,
    Opened,
    Progress,
    RunTo,
    SetBreakpoints,
    Step,
    Stopped,
    TensorRef,
)


class _DispatchProgress(DispatchObserver):
    """Reports each dispatch before it runs, so a crash in a kernel can be attributed to it."""

    def __init__(self, session: DebugSession):
        self.session = session

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.session._dispatch = record
        self.session.emit(Progress(self.session.location()))

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.session._dispatch = None


class DebugSession:
    def __init__(self, emit: Callable[[Event], Any]):
        self.emit = emit
        self.runner: DebugRunner | None = None
        self.controller: vmc.Controller | None = None
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self._function: str | None = None
        self._result_kinds = ""
        self._dispatch: DispatchRecord | None = None
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------------------- commands

    def handle(self, command: Command) -> None:
        try:
            handler = getattr(self, "_on_" + type(command).__name__.lower())
        except AttributeError:
            self.emit(Failed(f"unknown command {type(command).__name__}"))
            return
        try:
            handler(command)
        except LensError as e:
            self.emit(Failed(str(e), getattr(e, "status", None), self.location()))

    def pause(self) -> None:
        if self.controller is not None:
            self.controller.pause()

    def _on_open(self, command: Open) -> None:
        self.runner = DebugRunner(command.module_path, command.device)
        self.controller = vmc.Controller(self.runner.context)
        self._install_breakpoints()
        self._observe_dispatches()
        self.emit(Opened(command.module_path, tuple(self.runner.function_names), command.device))

    def _on_setbreakpoints(self, command: SetBreakpoints) -> None:
        self.breakpoints = command.breakpoints
        if self.controller is not None:
            self._install_breakpoints()

    def _on_call(self, command: Call) -> None:
        runner = self._need_runner()
        arg_kinds, self._result_kinds = split_cconv(runner.cconv(command.function))
        args = parse_inputs(list(command.inputs), arg_kinds)
        vm_args = [runner._to_vm(kind, value) for kind, value in zip(arg_kinds, args)]
        interpreter = runner.context.interpreter
        del interpreter.frames[interpreter.base :]
        interpreter.trap = None
        self._function = command.function
        runner.context.begin_call(command.function, vm_args)
        if command.stop_at_entry:
            self.emit(Stopped("entry", self.location(), self._snapshot()))
        else:
            self._report(self.controller.continue_())

    def _on_step(self, command: Step) -> None:
        c = self._need_controller()
        action = {"into": c.step_into, "over": c.step_over, "out": c.step_out}.get(command.mode)
        if action is None:
            raise DebugRunError(f"unknown step mode {command.mode!r} (into, over, out)")
        self._report(action())

    def _on_continue(self, command: Continue) -> None:
        self._report(self._need_controller().continue_())

    def _on_runto(self, command: RunTo) -> None:
        runner = self._need_runner()
        self._report(self._need_controller().run_to(runner.module.name, command.function, command.pc))

    def _on_evaluate(self, command: Evaluate) -> None:
        queries = {"registers": self._registers, "globals": self._globals, "frames": self._frames}
        if command.query not in queries:
            raise DebugRunError(f"unknown query {command.query!r} ({', '.join(queries)})")
        self.emit(Answer(command.query, queries[command.query](*command.args)))

    # ------------------------------------------------------------------------------------------ helpers

    def _need_runner(self) -> DebugRunner:
        if self.runner is None:
            raise DebugRunError("no module is open")
        return self.runner

    def _need_controller(self) -> vmc.Controller:
        self._need_runner()
        if self.runner.context.interpreter.finished:
            raise DebugRunError("no call in progress: start one first")
        return self.controller

    def _install_breakpoints(self) -> None:
        c = self.controller
        for bp in c.breakpoints:
            c.remove_breakpoint(bp)
        module = self.runner.module.name
        for bp in self.breakpoints:
            if bp.kind == "instruction" and bp.function is not None and bp.pc is not None:
                c.add_breakpoint(vmc.InstructionBreakpoint(bp.module or module, bp.function, bp.pc))
            elif bp.kind == "function" and bp.function:
                c.add_breakpoint(vmc.FunctionBreakpoint(bp.function, bp.module))
            elif bp.kind == "import" and bp.import_name:
                c.add_breakpoint(vmc.ImportBreakpoint(bp.import_name))

    def _observe_dispatches(self) -> None:
        self.runner.device.observers.append(_DispatchProgress(self))

    def _report(self, stop: vmc.StopEvent) -> None:
        if stop.reason == "done":
            runner = self.runner
            values = [runner._from_vm(kind, v) for kind, v in zip(self._result_kinds, stop.results or [])]
            outputs = tuple(
                TensorRef(v.shape, v.array.dtype.str, v.element_type.name, array=v.array)
                for v in values
                if isinstance(v, Tensor)
            )
            self.emit(Finished(self._function or "", format_results(values), outputs))
        elif stop.reason == "trap":
            trap = stop.trap
            self.emit(Failed(trap.describe(), trap.code.name, self.location(trap.stack)))
        else:
            detail = self._snapshot()
            if stop.record is not None and stop.record.import_call is not None:
                detail["import_call"] = stop.record.import_call.name
            if stop.breakpoints:
                detail["breakpoints"] = [repr(b) for b in stop.breakpoints]
            self.emit(Stopped(stop.reason, self.location(), detail))

    # ---------------------------------------------------------------------------------------- snapshots

    def location(self, stack: tuple[FrameLocation, ...] | None = None) -> Location:
        frames: list[FrameInfo] = []
        if self.runner is not None:
            interpreter = self.runner.context.interpreter
            for frame in interpreter.frames[interpreter.base :] if stack is None else ():
                frames.append(self._frame_info(frame.instance, frame.ordinal, frame.pc))
            for loc in stack or ():
                frames.append(
                    FrameInfo(getattr(loc, "module", ""), getattr(loc, "function", ""), getattr(loc, "pc", 0))
                )
        record = self._dispatch
        if record is None:
            return Location(tuple(frames))
        return Location(tuple(frames), record.export_name, record.sequence)

    @staticmethod
    def _frame_info(instance: ModuleInstance, ordinal: int, pc: int) -> FrameInfo:
        try:
            text = format_instruction(instance.instruction_at(ordinal, pc))
        except LensError:
            text = ""
        return FrameInfo(instance.name, instance.function_name(ordinal), pc, text)

    def _snapshot(self) -> dict[str, Any]:
        return {"registers": self._registers(), "frames": self._frames()}

    def _frames(self) -> list[dict[str, Any]]:
        interpreter = self.runner.context.interpreter
        return [
            {
                "module": f.instance.name,
                "function": f.instance.function_name(f.ordinal),
                "ordinal": f.ordinal,
                "pc": f.pc,
            }
            for f in interpreter.frames[interpreter.base :]
        ]

    def _registers(self, depth: int = -1) -> dict[str, Any]:
        """The registers of a frame (innermost by default): i32 words and ref descriptions."""
        interpreter = self.runner.context.interpreter
        frames = interpreter.frames[interpreter.base :]
        if not frames:
            return {"i32": [], "ref": []}
        frame = frames[depth]
        return {"i32": [int(w) for w in frame.i], "ref": [describe_ref(r) for r in frame.r]}

    def _globals(self) -> dict[str, Any]:
        instance = self.runner.context.main
        return {
            "rwdata": bytes(instance.rwdata).hex(),
            "refs": [describe_ref(r) for r in instance.global_refs],
        }
