"""Debugger control over an ``Interpreter``: stepping, continuing, breakpoints, pausing (plain Python, no Qt).

Breakpoints are resolved to instruction locations and installed as stubs in the module instances'
compiled code, so the fast ``Interpreter.run`` loop pays nothing for them:

* ``InstructionBreakpoint(module, function, pc)``: before that instruction;
* ``FunctionBreakpoint(function, module=None)``: on entry (pc 0) of the function;
* ``ImportBreakpoint("hal.command_buffer.dispatch")``: before every call instruction that calls that import.

Every command returns a ``StopEvent``. ``pause()`` may be called from another thread; the run loop
checks the flag between chunks of ``CHUNK`` instructions.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from engine.runtime.vm.context import ModuleInstance, VmContext
from engine.runtime.vm.interpreter import FrameLocation, Interpreter, StepRecord, VmTrap

CHUNK = 20000  # instructions between checks of the pause flag (about 2-10 ms)


@dataclass(frozen=True)
class InstructionBreakpoint:
    module: str
    function: str | int  # name or internal ordinal
    pc: int


@dataclass(frozen=True)
class FunctionBreakpoint:
    function: str
    module: str | None = None


@dataclass(frozen=True)
class ImportBreakpoint:
    name: str  # full import name, e.g. "hal.command_buffer.dispatch"


Breakpoint = InstructionBreakpoint | FunctionBreakpoint | ImportBreakpoint


@dataclass(frozen=True)
class StopEvent:
    """Why and where the VM stopped.

    ``reason``: ``step`` (a step command finished), ``breakpoint``, ``done`` (the invocation returned;
    ``results`` holds its values), ``trap`` (``trap`` holds the VmTrap with stack and status text),
    ``paused`` (``pause()`` was called).
    """

    reason: str
    location: FrameLocation | None
    stack: tuple[FrameLocation, ...] = ()
    record: StepRecord | None = None
    breakpoints: tuple[Any, ...] = ()
    trap: VmTrap | None = None
    results: list | None = field(default=None)
    steps: int = 0


class Controller:
    """Runs one interpreter under debugger commands."""

    def __init__(self, context: VmContext | None = None, interpreter: Interpreter | None = None):
        if interpreter is None:
            if context is None:
                raise ValueError("a Controller needs a context or an interpreter")
            interpreter = context.interpreter
        self.interpreter = interpreter
        self.instances: list[ModuleInstance] = []
        if context is not None:
            self.instances = [m for m in context.instances if isinstance(m, ModuleInstance)]
        self._breakpoints: dict[Breakpoint, set[tuple[ModuleInstance, int, int]]] = {}
        self._installed: dict[tuple[int, int, int], tuple[ModuleInstance, set]] = {}
        self._pause = threading.Event()
        # One-shot stops (e.g. right after the native call a paused dispatch runs in): a run that reaches
        # one returns a ``step`` event there.
        self._stop_targets: dict[tuple[int, int, int], ModuleInstance] = {}

    # -- breakpoints ----------------------------------------------------------------------------------------

    @property
    def breakpoints(self) -> list[Breakpoint]:
        return list(self._breakpoints)

    def add_breakpoint(self, bp: Breakpoint) -> int:
        """Install a breakpoint; returns how many instruction locations it resolved to."""
        self._install(bp, self.resolve(bp))
        return len(self._breakpoints[bp])

    def resolve(self, bp: Breakpoint) -> set[tuple[ModuleInstance, int, int]]:
        """The instruction locations ``bp`` names, installing nothing (empty: none, e.g. no function has
        that name). An ``InstructionBreakpoint`` raises ``KeyError`` for a function its module lacks and
        ``VmStatusError`` for a pc that is not the start of one of its instructions."""
        locations: set[tuple[ModuleInstance, int, int]] = set()
        for inst in self.instances:
            locations |= self._resolve_in(bp, inst)
        return locations

    def remove_breakpoint(self, bp: Breakpoint) -> None:
        for inst, ordinal, pc in self._breakpoints.pop(bp, set()):
            key = (id(inst), ordinal, pc)
            entry = self._installed.get(key)
            if entry is None:
                continue
            entry[1].discard(bp)
            if not entry[1]:
                if key not in self._stop_targets:
                    inst.clear_breakpoint(ordinal, pc)
                del self._installed[key]

    def _install(self, bp: Breakpoint, locations: set) -> None:
        self._breakpoints.setdefault(bp, set()).update(locations)
        for inst, ordinal, pc in locations:
            key = (id(inst), ordinal, pc)
            if key not in self._installed:
                inst.set_breakpoint(ordinal, pc)
                self._installed[key] = (inst, set())
            self._installed[key][1].add(bp)

    @staticmethod
    def _resolve_in(bp: Breakpoint, inst: ModuleInstance) -> set[tuple[ModuleInstance, int, int]]:
        if isinstance(bp, InstructionBreakpoint):
            if bp.module != inst.name:
                return set()
            ordinal = bp.function if isinstance(bp.function, int) else inst.function_ordinal(bp.function)
            inst.instruction_at(ordinal, bp.pc)  # raises for a pc that is not an instruction
            return {(inst, ordinal, bp.pc)}
        if isinstance(bp, FunctionBreakpoint):
            if bp.module not in (None, inst.name):
                return set()
            try:
                return {(inst, inst.function_ordinal(bp.function), 0)}
            except KeyError:
                return set()
        targets = {b.ordinal for b in inst.imports if b.name == bp.name}
        if not targets:
            return set()
        out = set()
        for ordinal in range(len(inst.functions)):
            for pc, ins in inst.instructions(ordinal).items():
                if ins.called_import in targets:
                    out.add((inst, ordinal, pc))
        return out

    def breakpoints_at(self, t: Interpreter) -> tuple:
        """The user breakpoints installed where ``t``'s top frame is (empty when none)."""
        f = t.frames[-1]
        entry = self._installed.get((id(f.instance), f.ordinal, f.pc))
        return tuple(entry[1]) if entry else ()

    # -- commands -------------------------------------------------------------------------------------------

    def pause(self) -> None:
        """Ask a running command to stop at the next chunk boundary (thread-safe)."""
        self._pause.set()

    @property
    def pause_requested(self) -> bool:
        """A pause was asked for and not taken yet (a replay checks it to stop early)."""
        return self._pause.is_set()

    def clear_pause(self) -> None:
        self._pause.clear()

    def take_pause(self) -> bool:
        """True (once) when a pause was asked for: lets code inside a native call (a dispatch) stop too."""
        if self._pause.is_set():
            self._pause.clear()
            return True
        return False

    def add_stop_target(self, instance: ModuleInstance, ordinal: int, pc: int) -> None:
        """Stop the running command (as a ``step``) when it reaches ``pc`` of ``instance``'s function."""
        key = (id(instance), ordinal, pc)
        if key not in self._stop_targets:
            self._stop_targets[key] = instance
            if key not in self._installed:
                instance.set_breakpoint(ordinal, pc)

    def clear_stop_targets(self) -> None:
        for key, instance in self._stop_targets.items():
            if key not in self._installed:
                instance.clear_breakpoint(key[1], key[2])
        self._stop_targets.clear()

    def stop_event(self, reason: str, **kw) -> StopEvent:
        """A ``StopEvent`` of ``reason`` where the interpreter is now."""
        t = self.interpreter
        top = t.top
        return StopEvent(reason, top.location if top is not None else None, t.call_stack(), **kw)

    def step_into(self) -> StopEvent:
        t = self.interpreter
        if t.finished:
            return self.stop_event("done", results=t.results)
        try:
            rec = t.step()
        except VmTrap as e:
            return self.stop_event("trap", trap=e, steps=1)
        if rec.event == "done":
            return self.stop_event("done", record=rec, results=t.results, steps=1)
        return self.stop_event("step", record=rec, breakpoints=self.breakpoints_at(t), steps=1)

    def step_over(self) -> StopEvent:
        """Execute one instruction; a call to a bytecode function runs to its return."""
        t = self.interpreter
        if t.finished:
            return self.stop_event("done", results=t.results)
        f = t.frames[-1]
        depth = len(t.frames)
        ins = f.instance.instruction_at(f.ordinal, f.pc)
        if not ins.opcode.symbol.startswith("Call"):
            return self.step_into()
        first = self.step_into()
        if first.reason != "step" or len(t.frames) <= depth:
            return first
        return self._continue_until(lambda: len(t.frames) <= depth, steps=1)

    def step_out(self) -> StopEvent:
        """Run until the current function returns to its caller."""
        t = self.interpreter
        depth = len(t.frames)
        return self._continue_until(lambda: len(t.frames) < depth)

    def continue_(self) -> StopEvent:
        return self._continue_until(None)

    def continue_from_entry(self) -> StopEvent:
        """Continue a call just begun (its entry frame at pc 0). A breakpoint on that first instruction (``break
        function`` of the called function) stops it before it runs: ``continue_`` would step over it, as
        ``Interpreter.run`` steps over a stub at the pc it starts from (a resume from a stop must)."""
        t = self.interpreter
        hit = self.breakpoints_at(t) if not t.finished else ()
        if hit:
            return self.stop_event("breakpoint", breakpoints=hit)
        return self.continue_()

    def run_to(self, module: str, function: str | int, pc: int) -> StopEvent:
        """Continue until the instruction at ``pc`` of ``module.function`` (or another stop)."""
        bp = InstructionBreakpoint(module, function, pc)
        had = bp in self._breakpoints
        if not had:
            self.add_breakpoint(bp)
        try:
            return self._continue_until(None)
        finally:
            if not had:
                self.remove_breakpoint(bp)

    def _continue_until(self, condition, steps: int = 0) -> StopEvent:
        """Run in chunks until done, a trap, pause, a breakpoint, or ``condition()`` (checked at each
        frame change, via temporary breakpoints at the resume pcs of the frames below)."""
        t = self.interpreter
        self._pause.clear()
        temp: list[tuple[ModuleInstance, int, int]] = []
        if condition is not None:
            # Stop where control can come back to the frames below the current one.
            for f in t.frames[t.base : -1] if len(t.frames) > t.base else []:
                key = (id(f.instance), f.ordinal, f.pc)
                if key not in self._installed and (f.instance, f.ordinal, f.pc) not in temp:
                    f.instance.set_breakpoint(f.ordinal, f.pc)
                    temp.append((f.instance, f.ordinal, f.pc))
        try:
            while True:
                if t.finished:
                    return self.stop_event("done", results=t.results, steps=steps)
                if self._pause.is_set():
                    self._pause.clear()
                    return self.stop_event("paused", steps=steps)
                try:
                    outcome = t.run(CHUNK)
                except VmTrap as e:
                    return self.stop_event("trap", trap=e, steps=steps)
                steps += outcome.steps
                if outcome.reason == "done":
                    return self.stop_event("done", results=outcome.results, steps=steps)
                if outcome.reason == "break":
                    f = t.frames[-1]
                    if (id(f.instance), f.ordinal, f.pc) in self._stop_targets:
                        self.clear_stop_targets()
                        return self.stop_event("step", steps=steps, breakpoints=self.breakpoints_at(t))
                    if condition is not None and condition():
                        return self.stop_event("step", steps=steps, breakpoints=self.breakpoints_at(t))
                    hit = self.breakpoints_at(t)
                    if hit:
                        return self.stop_event("breakpoint", breakpoints=hit, steps=steps)
                    # A temporary stop for a deeper activation: keep going.
        finally:
            for inst, ordinal, pc in temp:
                key = (id(inst), ordinal, pc)
                if key not in self._installed and key not in self._stop_targets:
                    inst.clear_breakpoint(ordinal, pc)
