"""Reverse execution for the debug engine: checkpoints plus deterministic replay.

The VM and the emulated HAL are deterministic given the same inputs, so the state at any earlier position
of a call (see ``recorder``) is rebuilt exactly by restoring the nearest earlier checkpoint (``snapshot``)
and running forward, with the fast ``run`` loop, to that position. Checkpoints are taken every
``interval`` instructions while the program runs forward (the interval grows when a snapshot is costly,
so recording stays cheap), position 0 (the start of the call) included. Memory is bounded by
``budget_bytes``: the oldest checkpoints are dropped first, and ``earliest`` says how far back one can go.

Operations follow gdb: ``reverse_step`` (reverse-stepi: back N instructions), ``reverse_next`` (back over
calls: to the previous instruction of this frame), ``reverse_finish`` (back to the call instruction that
entered the current function), ``reverse_continue`` (back to the previous breakpoint hit of the
controller's breakpoints, or a dispatch stop), ``goto`` (any recorded position, or a dispatch) and
``last_change`` ("when did this change?" for a register, a global or a buffer element).

Dispatches are reported at instruction granularity: "before dispatch k" is the position of the instruction
whose native call ran it, "after" the position that follows. While the engine replays, the devices'
observers (a session's dispatch gate) are set aside: replayed dispatches are not new events.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.errors import LensError
from engine.runtime.hal.buffers import Allocation
from engine.runtime.hal.device import Device, DispatchRecord
from engine.runtime.vm.context import ModuleInstance, VmContext
from engine.runtime.vm.controller import CHUNK, Controller, StopEvent
from engine.runtime.vm.interpreter import FrameLocation, VmTrap
from engine.timetravel.dispatch_marks import DispatchMark, DispatchStop, MarkingObserver
from engine.timetravel.dispatch_memo import MEMO_BUDGET, MEMO_SECONDS, DispatchMemo
from engine.timetravel.recorder import RecordingInterpreter
from engine.timetravel.snapshot import ArrayStore, Snapshot, restore_snapshot, take_snapshot
from engine.timetravel.watch import Change, Watch, serial_of

DEFAULT_INTERVAL = 1_000  # instructions to the first checkpoint after the start; then adaptive
DEFAULT_BUDGET = 512 << 20  # bytes of checkpoints kept
SNAPSHOT_SHARE = 0.05  # at most this share of forward run time goes to taking snapshots
REPLAY_SECONDS = 0.03  # the replay of one checkpoint interval (adaptive spacing)
MIN_INTERVAL = 64


class TimeTravelError(LensError):
    """A reverse command cannot be done (no recorded call, a position outside the history...)."""


class TimeTravelInterrupted(TimeTravelError):
    """``Controller.pause()`` was asked while a reverse command searched the history; the state is back
    where the command started."""


Place = tuple[int, int, int]


def place(position: int, sequence: int = -1, when: str | None = None) -> Place:
    """A place in the history, ordered as the program passed it: the instruction position, then inside an
    instruction that runs dispatches (one ``queue.execute`` runs a whole command buffer) the dispatch and
    before (0) or after (1) it; ``place(position)`` is the instruction's start, before all of them."""
    return (position, sequence, 1 if when == "after" else 0)


PAUSE_CHECK = 256  # instructions of a one-at-a-time replay between checks of the pause flag


@dataclass(frozen=True)
class TravelStop:
    """Where a reverse command stopped. ``reason``: ``step``, ``breakpoint``, ``dispatch`` (a dispatch stop;
    ``dispatch`` and ``when`` say which), or ``history-start`` (nothing earlier is recorded)."""

    reason: str
    position: int
    dispatches: int
    location: FrameLocation | None
    stack: tuple[FrameLocation, ...]
    breakpoints: tuple[Any, ...] = ()
    dispatch: DispatchMark | None = None
    when: str | None = None


class TimeTravel:
    """History of the current call of ``context`` (see the module docstring).

    Install it before the call begins: it replaces ``context.interpreter`` by a ``RecordingInterpreter``
    (the controller is pointed at it) and numbers the devices' allocations. Then ``begin_call`` (or the
    caller's own ``context.begin_call`` followed by ``start_recording``), forward commands through
    ``controller`` or the helpers here, reverse commands here.
    """

    def __init__(
        self,
        context: VmContext,
        controller: Controller | None = None,
        devices: list[Device] | None = None,
        *,
        interval: int = DEFAULT_INTERVAL,
        budget_bytes: int = DEFAULT_BUDGET,
        adaptive: bool = True,
        memo_seconds: float = MEMO_SECONDS,
        memo_budget: int = MEMO_BUDGET,
    ):
        old = context.interpreter
        if isinstance(old, RecordingInterpreter):
            interp = old
        else:
            interp = RecordingInterpreter()
            context.use_interpreter(interp)
        self.context = context
        self.interpreter: RecordingInterpreter = interp
        self.controller = controller or Controller(context)
        self.controller.interpreter = interp
        self.instances = [m for m in context.instances if isinstance(m, ModuleInstance)]
        if devices is None:
            devices = [d for m in context.instances for d in getattr(m, "devices", ())]
        self.devices: list[Device] = devices
        self.min_interval = self.interval = max(1, interval)
        self.budget_bytes = budget_bytes
        self.adaptive = adaptive  # widen the interval when snapshots are costly
        self.checkpoints: dict[int, Snapshot] = {}
        self.positions: list[int] = []  # sorted keys of checkpoints
        self.dispatch_log: dict[int, DispatchMark] = {}
        self.snapshot_seconds = 0.0
        self._store = ArrayStore()
        self._serial = 0
        self.allocations: dict[int, Allocation] = {}
        self.marks_observer = MarkingObserver(self)
        # Costly dispatches' results, written back by replays instead of running the kernels again.
        self.memo = DispatchMemo(memo_seconds, memo_budget)
        self._last_boundary = (0, 0.0)
        self._dirty = False
        for device in self.devices:
            self._number_allocations(device)
            device.add_observer(self.marks_observer, first=True)  # before a gate that may park the run
            device.kernel_hook = self.memo
        interp.on_boundary = self._on_boundary
        interp.on_begin = self.start_recording  # every new call (a session's, an invoke) is recorded

    @classmethod
    def for_runner(cls, runner: Any, **kw: Any) -> TimeTravel:
        """For a ``DebugRunner`` (its context and device)."""
        return cls(runner.context, devices=[runner.device], **kw)

    # -- recording ---------------------------------------------------------------------------------------

    def _number_allocations(self, device: Device) -> None:
        # Replay creates allocations in the same order, so the serial names the same buffer in every
        # replay of the run.
        if self._name not in device.allocation_listeners:
            device.allocation_listeners.append(self._name)

    def _name(self, allocation: Allocation) -> None:
        if serial_of(allocation) is None:
            allocation.lens_serial = self._serial  # type: ignore[attr-defined]
            self._serial += 1
        self.allocations[allocation.lens_serial] = allocation  # type: ignore[attr-defined]

    def begin_call(self, function: str, args: list) -> None:
        """Begin a call of ``function`` (VM values) and record it from its first instruction."""
        self.interpreter.reset()
        self.context.begin_call(function, list(args))  # starts the recording (``on_begin``)

    def start_recording(self) -> None:
        """Make the current state (a call just begun) position 0 of a new history."""
        t = self.interpreter
        t.position = 0
        t.high_water = 0
        t.recording = True
        self.checkpoints.clear()
        self.positions.clear()
        self.dispatch_log.clear()
        self.memo.clear()
        self._store = ArrayStore()
        self.interval = self.min_interval
        self._last_boundary = (0, t.busy_seconds)
        self._checkpoint(0)
        # Buffers made before the call (module constants, globals, inputs) get their serials now.
        for obj, _ in self.checkpoints[0].objects:
            if isinstance(obj, Allocation):
                self._name(obj)
        self.checkpoints[0].extra["serial"] = self._serial

    def _checkpoint(self, position: int) -> None:
        start = time.perf_counter()
        snap = take_snapshot(self.interpreter, self.instances, self.devices, position, self._store)
        snap.extra["serial"] = self._serial
        self.snapshot_seconds += time.perf_counter() - start
        self.checkpoints[position] = snap
        bisect.insort(self.positions, position)
        self._enforce_budget()
        self.interpreter.checkpoint_at = self.positions[-1] + self.interval

    def _on_boundary(self, position: int) -> None:
        t = self.interpreter
        if position in self.checkpoints or position <= self.positions[-1]:
            t.checkpoint_at = self.positions[-1] + self.interval
            return
        last_pos, last_busy = self._last_boundary
        start = time.perf_counter()
        self._checkpoint(position)
        cost = time.perf_counter() - start
        busy = t.busy_seconds - last_busy
        if self.adaptive and position > last_pos and busy > 0:
            # Space checkpoints by time, not instructions: a replay of one interval takes about
            # REPLAY_SECONDS (dispatch-heavy code runs far fewer instructions a second), and taking a
            # snapshot stays under SNAPSHOT_SHARE of the run.
            rate = (position - last_pos) / busy
            self.interval = max(
                MIN_INTERVAL, int(rate * REPLAY_SECONDS), int(rate * cost / SNAPSHOT_SHARE)
            )
            t.checkpoint_at = position + self.interval
        self._last_boundary = (position, t.busy_seconds)

    def _enforce_budget(self) -> None:
        while len(self.positions) > 1 and self.memory_bytes > self.budget_bytes:
            del self.checkpoints[self.positions.pop(0)]
        self._store.forget_dead()

    # -- where we are --------------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        return self.interpreter.position

    @property
    def earliest(self) -> int:
        """The first position one can go back to (older checkpoints were dropped to stay in budget)."""
        if not self.positions:
            raise TimeTravelError("no call is being recorded")
        return self.positions[0]

    @property
    def latest(self) -> int:
        """The furthest position the call has reached."""
        return self.interpreter.high_water

    @property
    def memory_bytes(self) -> int:
        return sum(s.nbytes for s in self.checkpoints.values())

    @property
    def dispatch_count(self) -> int:
        return self.devices[0].dispatch_count if self.devices else 0

    def _depth(self) -> int:
        t = self.interpreter
        return max(0, len(t.frames) - t.base)

    def _stop(self, reason: str, **kw: Any) -> TravelStop:
        t = self.interpreter
        top = t.top
        return TravelStop(
            reason, t.position, self.dispatch_count, top.location if top else None, t.call_stack(), **kw
        )

    # -- forward helpers (the controller's commands, N times) --------------------------------------------

    def step(self, count: int = 1) -> StopEvent:
        return self._repeat(self.controller.step_into, count)

    def next(self, count: int = 1) -> StopEvent:
        return self._repeat(self.controller.step_over, count)

    def finish(self) -> StopEvent:
        return self.controller.step_out()

    def continue_(self) -> StopEvent:
        return self.controller.continue_()

    def _repeat(self, action: Callable[[], StopEvent], count: int) -> StopEvent:
        if count < 1:
            return self.controller.stop_event("step")
        stop = action()
        for _ in range(count - 1):
            if stop.reason != "step":
                break
            stop = action()
        return stop

    # -- moving in the history -----------------------------------------------------------------------------

    def _need_history(self) -> None:
        if not self.interpreter.recording or not self.positions:
            raise TimeTravelError("no call is being recorded: begin one under time travel first")

    def goto(self, position: int) -> TravelStop:
        """Make the state exactly what it was at ``position`` (earliest <= position <= latest)."""
        self._need_history()
        if position < self.earliest:
            raise TimeTravelError(
                f"position {position} is before the recorded history (it starts at {self.earliest})"
            )
        if position > self.latest:
            raise TimeTravelError(f"position {position} has not been reached yet (latest: {self.latest})")
        t = self.interpreter
        k = bisect.bisect_right(self.positions, position) - 1
        base = self.positions[k]
        if self._dirty or not (base <= t.position <= position):
            self.restore(base)
        self.run_to(position)
        return self._stop("step")

    def goto_dispatch(self, ordinal: int, when: str = "before") -> TravelStop:
        """Go to the instruction that ran dispatch ``ordinal`` (``before``) or just after it (``after``)."""
        mark = self.locate_dispatch(ordinal)
        self.goto(mark.position + (when == "after"))
        return self._stop("dispatch", dispatch=mark, when=when)

    def invalidate(self) -> None:
        """The live state left the history (a run abandoned inside a native call): the next move
        restores a checkpoint instead of running on from here."""
        self._dirty = True

    def locate_dispatch(self, ordinal: int, *, whole_instruction: bool = False) -> DispatchMark:
        """The dispatch's mark with the exact position of the instruction that ran it (found by replay
        when the dispatch ran inside a fast run); the state is left where it was. ``whole_instruction``:
        the history also reaches the end of that instruction (a run abandoned inside the dispatch never
        finished it), so that the position just after it can be travelled to."""
        mark = self.dispatch_log.get(ordinal)
        if mark is None or mark.position < self.earliest:
            raise TimeTravelError(f"dispatch {ordinal} is not in the recorded history")
        if mark.exact and (not whole_instruction or self.latest > mark.position):
            return mark
        here = None if self._dirty else self.position
        k = bisect.bisect_right(self.positions, mark.position) - 1
        self.restore(self.positions[k])
        t = self.interpreter
        saved = self.aside()
        # The replay stops as soon as the dispatch is seen: the rest of its command buffer (kernels that
        # can take minutes on a slow device) is not run again just to find where it started.
        self.marks_observer.locating = None if whole_instruction else ordinal
        try:
            while self.dispatch_count <= ordinal and not t.finished:
                t.run(1, ignore_breakpoints=True)
        except Exception:
            if not self.marks_observer.located:
                raise
        finally:
            self.marks_observer.locating = None
            self.back(saved)
        if self.marks_observer.located:
            self.marks_observer.located = False
            self._dirty = True  # left inside the instruction: the next move restores a checkpoint
        if here is not None:
            self.goto(here)
        mark = self.dispatch_log[ordinal]
        if not mark.exact:
            raise TimeTravelError(f"dispatch {ordinal} was not found again by replay")
        return mark

    def aside(self) -> tuple:
        """Set the devices' observers aside (ours only) and stop taking checkpoints, for a replay."""
        t = self.interpreter
        saved = ([(d, d.observers_aside([self.marks_observer])) for d in self.devices], t.checkpoint_at)
        t.checkpoint_at = None
        return saved

    def back(self, saved: tuple) -> None:
        observers, self.interpreter.checkpoint_at = saved
        for d, obs in observers:
            d.restore_observers(obs)

    def restore(self, position: int) -> None:
        snap = self.checkpoints[position]
        self.controller.clear_stop_targets()
        restore_snapshot(snap, self.interpreter)
        self.interpreter.position = position
        self._serial = snap.extra["serial"]
        self._dirty = False

    def run_to(self, target: int) -> None:
        """Replay (observers set aside, no new checkpoints) up to ``target``."""
        t = self.interpreter
        if t.position >= target:
            return
        saved = self.aside()
        try:
            while t.position < target and not t.finished:
                t.run(target - t.position, ignore_breakpoints=True)
        except VmTrap as e:
            raise TimeTravelError(f"replay trapped at position {t.position}: {e.describe()}") from e
        finally:
            self.back(saved)

    def segments(self, end: int):
        """(start, end) ranges from the latest checkpoint before ``end`` back to the earliest."""
        for p in reversed(self.positions):
            if p < end:
                yield p, end
                end = p

    def scan(self, start: int, end: int, visit: Callable[[int], None]) -> None:
        """Replay ``[start, end)`` one instruction at a time; ``visit(p)`` at each boundary p in [start, end]."""
        t = self.interpreter
        self.restore(start)
        saved = self.aside()
        controller = self.controller
        n = 0
        try:
            visit(t.position)
            while t.position < end and not t.finished:
                t.run(1, ignore_breakpoints=True)
                visit(t.position)
                n += 1
                if n % PAUSE_CHECK == 0 and controller.pause_requested:
                    raise TimeTravelInterrupted(f"interrupted while replaying (at position {t.position})")
        finally:
            self.back(saved)

    # -- reverse commands ------------------------------------------------------------------------------------

    def reverse_step(self, count: int = 1) -> TravelStop:
        """Back ``count`` instructions (gdb's reverse-stepi)."""
        self._need_history()
        target = self.position - count
        if target < self.earliest:
            self.goto(self.earliest)
            return self._stop("history-start")
        return self.goto(target)

    def _back_to(self, accept: Callable[[int], bool], here: int) -> int | None:
        """The last position before ``here`` whose state satisfies ``accept`` (checked at each boundary
        of a replay), or None."""
        found: list[int] = []
        for start, end in self.segments(here):
            found.clear()

            def visit(p: int, end: int = end) -> None:
                if p < end and accept(p):
                    found.append(p)

            self.scan(start, end, visit)
            if found:
                return found[-1]
        return None

    def reverse_next(self, count: int = 1) -> TravelStop:
        """Back ``count`` instructions of this frame, stepping back over calls (gdb's reverse-nexti)."""
        self._need_history()
        here = self.position
        stop = self._stop("step")
        with self._back_here_if_interrupted(here):
            for _ in range(count):
                stop = self._reverse_next_one()
                if stop.reason != "step":
                    break
        return stop

    @contextmanager
    def _back_here_if_interrupted(self, here: int):
        self.controller.clear_pause()
        try:
            yield
        except TimeTravelInterrupted:
            self.controller.clear_pause()
            self._dirty = True
            self.goto(here)
            raise

    def _reverse_next_one(self) -> TravelStop:
        if self.position <= self.earliest:
            return self._stop("history-start")
        depth = self._depth()
        if depth == 0:  # the call returned: back to its return instruction
            return self.goto(self.position - 1)
        here = self.position
        top = self.interpreter.top
        instance, ordinal, pc = top.instance, top.ordinal, top.pc
        self.goto(here - 1)
        if self._depth() <= depth:  # the previous instruction ran in this frame (or this one began)
            return self._stop("step")
        # It ran in a callee that just returned: back to the call instruction, before ``pc``.
        target = self._last_at(instance, ordinal, _call_pc(instance, ordinal, pc), depth, here)
        if target is None:
            target = self._back_to(lambda p: self._depth() <= depth, here)
        if target is None:
            self.goto(self.earliest)
            return self._stop("history-start")
        return self.goto(target)

    def reverse_finish(self) -> TravelStop:
        """Back to the call instruction that entered the current function (gdb's reverse-finish)."""
        self._need_history()
        depth = self._depth()
        if depth <= 1:
            raise TimeTravelError('"reverse-finish" not meaningful in the outermost frame')
        here = self.position
        caller = self.interpreter.frames[-2]
        with self._back_here_if_interrupted(here):
            call = _call_pc(caller.instance, caller.ordinal, caller.pc)
            target = self._last_at(caller.instance, caller.ordinal, call, depth - 1, here)
            if target is None:
                target = self._back_to(lambda p: self._depth() < depth, here)
        if target is None:
            self.goto(here)
            return self._stop("history-start")
        return self.goto(target)

    def _last_at(self, instance: ModuleInstance, ordinal: int, pc: int, depth: int, before: int) -> int | None:
        """The last position before ``before`` where the top frame (at ``depth``) was about to execute
        ``pc`` of ``instance``'s function ``ordinal``: fast replays with a stub there, newest segment first."""
        if pc < 0:
            return None
        t = self.interpreter
        controller = self.controller
        ours = (ordinal, pc) not in instance.breakpoints
        if ours:
            instance.set_breakpoint(ordinal, pc)

        def at_target() -> bool:
            f = t.top
            return (
                f is not None and f.instance is instance and f.ordinal == ordinal and f.pc == pc
                and self._depth() == depth
            )

        try:
            for start, end in self.segments(before):
                hits: list[int] = []
                self.restore(start)
                saved = self.aside()
                try:
                    if at_target():
                        hits.append(t.position)
                    while t.position < end and not t.finished:
                        if controller.pause_requested:
                            raise TimeTravelInterrupted(f"interrupted while replaying (at position {t.position})")
                        out = t.run(min(end - t.position, CHUNK))
                        if out.reason == "break" and t.position < end and at_target():
                            hits.append(t.position)
                except VmTrap:
                    pass
                finally:
                    self.back(saved)
                if hits:
                    return hits[-1]
            return None
        finally:
            if ours:
                instance.clear_breakpoint(ordinal, pc)

    def reverse_continue(
        self, dispatch_stop: DispatchStop | None = None, limit: Place | None = None
    ) -> TravelStop:
        """Back to the previous hit of a breakpoint of the controller (instruction, function, import) or,
        with ``dispatch_stop``, of a dispatch for which it answers True; else to the history's start.

        ``limit``: the place the search starts from when it is inside an instruction (a run parked at a
        dispatch of a command buffer: ``place(position, sequence, when)``); the state is then at the end of
        that instruction. Hits are ordered by place, so one before or after an earlier dispatch of the same
        command buffer is found (positions alone cannot tell them apart)."""
        self._need_history()
        here = self.position
        if dispatch_stop is None and not self.controller.breakpoints:
            self.goto(self.earliest)
            return self._stop("history-start")
        with self._back_here_if_interrupted(here):
            found = self._reverse_continue(here, dispatch_stop, limit or place(here))
        if found is None:
            self.goto(self.earliest)
            return self._stop("history-start")
        return found

    def breakpoint_between(self, floor: int, before: int, dispatch_stop: DispatchStop | None = None) -> TravelStop | None:
        """The last breakpoint hit (as ``reverse_continue`` finds them) after position ``floor`` and before
        ``before``, gone to; None when none was hit in between, the state then at ``floor``: gdb's reverse-next
        stops at a breakpoint inside a call it steps back over."""
        self._need_history()
        if dispatch_stop is None and not self.controller.breakpoints:
            return None
        with self._back_here_if_interrupted(floor):
            found = self._reverse_continue(before, dispatch_stop, place(before), floor)
        if found is None:
            self.goto(floor)
        return found

    def _reverse_continue(
        self, here: int, dispatch_stop: DispatchStop | None, limit: Place, floor: int | None = None
    ) -> TravelStop | None:
        """The latest hit before ``limit`` (after ``floor`` when given), gone to; None when there is none."""
        obs = self.marks_observer
        t = self.interpreter
        for start, end in self.segments(here):
            if floor is not None and end <= floor:
                break  # this segment and the older ones end before the floor
            hits: list[tuple[int, tuple]] = []
            self.restore(start)
            saved = self.aside()
            obs.predicate, obs.hits = dispatch_stop, []
            try:
                bps = self.controller.breakpoints_at(t) if t.at_stub() else ()
                if bps:
                    hits.append((t.position, bps))
                while t.position < end and not t.finished:
                    if self.controller.pause_requested:
                        raise TimeTravelInterrupted(f"interrupted while replaying (at position {t.position})")
                    out = t.run(min(end - t.position, CHUNK))
                    if out.reason == "break" and t.position < end:
                        bps = self.controller.breakpoints_at(t)
                        if bps:
                            hits.append((t.position, bps))
            except VmTrap:
                pass  # the history ends with this trap: hits before it count
            finally:
                obs.predicate = None
                self.back(saved)
            if floor is not None:
                hits = [h for h in hits if h[0] > floor]
            best = max(hits, key=lambda h: h[0]) if hits else None
            # The latest dispatch stop before the limit (marks found by a fast run are located exactly).
            dispatch_hit = None
            for ordinal, when in sorted(obs.hits, key=lambda h: (h[0], h[1] == "after"), reverse=True):
                mark = self.locate_dispatch(ordinal)
                key = place(mark.position, ordinal, when)
                if key < limit and (floor is None or mark.position > floor):
                    dispatch_hit = (key, mark, when)
                    break
            if dispatch_hit is not None and (best is None or dispatch_hit[0] > place(best[0])):
                _, mark, when = dispatch_hit
                self.goto(min(mark.position + (when == "after"), self.latest))
                return self._stop("dispatch", dispatch=mark, when=when)
            if best is not None:
                self.goto(best[0])
                return self._stop("breakpoint", breakpoints=best[1])
        return None

    def replay_dispatches(self, watch: Callable[[DispatchRecord, str], None], end: int | None = None) -> None:
        """Replay the history from its start to ``end`` (the current position) in order, ``watch`` seeing
        every dispatch before and after it runs (nothing stops the replay); the state is then put back where
        it was. A condition set after its dispatches ran (a diverge breakpoint, whose verdicts depend on the
        dispatches before) judges them here as it would have forward."""
        self._need_history()
        here = self.position
        end = here if end is None else end
        obs = self.marks_observer
        t = self.interpreter
        with self._back_here_if_interrupted(here):
            self.restore(self.earliest)
            saved = self.aside()
            obs.hook = watch
            try:
                while t.position < end and not t.finished:
                    if self.controller.pause_requested:
                        raise TimeTravelInterrupted(f"interrupted while replaying (at position {t.position})")
                    t.run(min(end - t.position, CHUNK), ignore_breakpoints=True)
            except VmTrap:
                pass  # the history ends with this trap: the dispatches before it were seen
            finally:
                obs.hook = None
                self.back(saved)
            self._dirty = True
            self.goto(here)

    # -- when did this change? ----------------------------------------------------------------------------------

    def last_change(self, watch: Watch) -> Change | None:
        """The last instruction before the current position after which ``watch``'s value differed, with
        the dispatch that wrote it when one did; the state is left at the current position. None when the
        value did not change in the recorded history."""
        from engine.timetravel.when_changed import last_change

        self._need_history()
        return last_change(self, watch)


def _call_pc(instance: ModuleInstance, ordinal: int, resume: int) -> int:
    """The pc of the instruction that ends at ``resume`` (the call a frame resumes after), or -1."""
    for ins in instance.instructions(ordinal).values():
        if ins.next_pc == resume:
            return ins.pc
    return -1
