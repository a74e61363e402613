"""The position model: an interpreter that counts the instructions of the recorded call.

A *position* is the number of top-level instructions the current call has executed since it began
(``begin_call`` is position 0; each ``step()`` or each instruction of ``run()`` adds one; the
instructions of a nested invocation, e.g. a VMVX dispatch run on this interpreter, belong to the
instruction that made the native call). With the dispatch ordinal (``Device.dispatch_count``) it names a
moment of the run.

``RecordingInterpreter`` is a drop-in ``Interpreter``: the controller, its breakpoints and the fast
``run`` loop work unchanged. When ``checkpoint_at`` is set, ``run`` splits its budget so that it stops at
that exact position and calls ``on_boundary`` there (the time-travel engine takes a checkpoint). A split
never swallows a breakpoint: a run resumed at a split point reports the breakpoint stub it finds there,
as an unsplit run would have stopped there.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

from engine.runtime.vm.interpreter import Interpreter, RunOutcome, StepRecord


class RecordingInterpreter(Interpreter):
    def __init__(self) -> None:
        super().__init__()
        self.position = 0
        self.recording = False
        self.checkpoint_at: int | None = None  # the next position where ``on_boundary`` wants a call
        self.on_boundary: Callable[[int], None] | None = None
        self.on_begin: Callable[[], None] | None = None  # a new top-level call began (history restarts)
        self.high_water = 0  # the furthest position reached
        # The budget of the run in progress: when it is 1 (or a step), ``position`` is exact inside a
        # native call (a dispatch observer can trust it); otherwise the run started at ``position``.
        self.run_budget = 0
        self.busy_seconds = 0.0  # time spent executing the recorded call (not paused between commands)

    def begin_call(self, instance, ordinal: int, args: list, *, nested: bool = False) -> None:
        super().begin_call(instance, ordinal, args, nested=nested)
        if not nested and self.on_begin is not None:
            self.on_begin()

    @property
    def top_level(self) -> bool:
        return self.base == 0 and self.native_depth == 0

    def at_stub(self) -> bool:
        if len(self.frames) <= self.base:
            return False
        f = self.frames[-1]
        return f.code[f.pc] is not f.instance.plain_code(f.ordinal)[f.pc]

    def _boundary(self) -> None:
        if self.checkpoint_at is not None and self.position >= self.checkpoint_at and self.on_boundary:
            self.on_boundary(self.position)

    def run(self, max_steps: int, *, ignore_breakpoints: bool = False) -> RunOutcome:
        if not self.recording or not self.top_level:
            return super().run(max_steps, ignore_breakpoints=ignore_breakpoints)
        total = 0
        while True:
            budget = max_steps - total
            if self.checkpoint_at is not None and self.checkpoint_at > self.position:
                budget = min(budget, self.checkpoint_at - self.position)
            if total and not ignore_breakpoints and self.at_stub():
                return RunOutcome("break", total)
            before = self.steps_executed
            self.run_budget = budget
            started = perf_counter()
            try:
                outcome = super().run(budget, ignore_breakpoints=ignore_breakpoints)
            except Exception:
                # Without nesting, the instructions counted before the trap are this call's.
                self.position += self.steps_executed - before
                self.high_water = max(self.high_water, self.position)
                raise
            finally:
                self.run_budget = 0
                self.busy_seconds += perf_counter() - started
            total += outcome.steps
            self.position += outcome.steps
            if self.position > self.high_water:
                self.high_water = self.position
            if outcome.reason == "done":
                return RunOutcome("done", total, outcome.results)
            self._boundary()
            if outcome.reason == "break" or total >= max_steps:
                return RunOutcome(outcome.reason, total, outcome.results)

    def step(self) -> StepRecord:
        counted = self.recording and self.top_level
        if counted:
            self.run_budget = 1
        started = perf_counter()
        try:
            rec = super().step()
        finally:
            if counted:
                self.run_budget = 0
                self.busy_seconds += perf_counter() - started
        if counted:
            self.position += 1
            if self.position > self.high_water:
                self.high_water = self.position
            if rec.event != "done":
                self._boundary()
        return rec
