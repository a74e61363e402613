"""The debug session with history: ``DebugSession`` plus the ``Reverse`` and ``TravelTo`` commands.

``TimeTravelSession`` records every call it runs (``TimeTravel`` attached when a module opens) and answers
``Reverse(mode, count)`` — gdb's ``reverse-step``, ``reverse-next``, ``reverse-finish`` and
``reverse-continue`` — and ``TravelTo(position | dispatch)`` (a timeline's jump) with the same ``Stopped``
events as the forward commands (reason ``step``,
``breakpoint`` or ``dispatch``; ``history-start`` when nothing earlier is recorded). Reverse commands run on
the command loop: the run thread is idle (a run parked inside a dispatch is abandoned first; the history
puts the state back exactly). Stepping back is allowed after the program finished.

Moves are between places (``docs/ARCHITECTURE.md``, "Stops"; gdb is the reference): inside an instruction
that runs a command buffer each dispatch, before and after it, is a place of its own. A reverse-step from a
parked dispatch goes to the dispatch place before it; a reverse move that ends inside a command buffer parks
the run there, so a forward command runs on from that place; reverse-continue finds the latest hit of any
condition before the current place (``TimeTravel.reverse_continue``'s ``limit``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshot
from engine.dispatch.tensor_types import TensorType
from engine.runtime.hal.buffers import HalBufferView
from engine.runtime.hal.device import DispatchRecord
from engine.session.debug_session import DebugSession
from engine.session.dispatch_gate import dispatch_matches, executable_name
from engine.session.nonfinite import nonfinite_written
from engine.session.protocol import (
    Breakpoint,
    BreakpointKind,
    Change,
    DispatchMark,
    Failed,
    History,
    LastChange,
    ReadHistory,
    Reverse,
    ReverseMode,
    Step,
    StopDetail,
    Stopped,
    StopReason,
    TravelTo,
    Watch,
    WatchBinding,
    WatchGlobal,
    WatchGlobalContents,
    WatchGlobalRef,
    WatchRegister,
    WatchRegisterContents,
    WhenChanged,
)
from engine.session.session_globals import GlobalsError, describe_bytes_change, primitive_text
from engine.timetravel.engine import TimeTravel, TimeTravelError, TravelStop, place


class TimeTravelSession(DebugSession):
    def __init__(self, emit):
        super().__init__(emit)
        self.travel: TimeTravel | None = None
        self.register_command(Reverse, self._on_reverse)
        self.register_command(TravelTo, self._on_travel_to)
        # The device sequence of the dispatch a forward step last left (it began parked inside it): a
        # reverse step back onto that dispatch's instruction returns inside its command buffer, undoing the
        # step; a reverse step onto any other instruction lands on the instruction boundary, as the forward
        # step into it did (a forward step from a boundary runs a command buffer whole).
        self._stepped_out_of: int | None = None
        # ReadHistory: where the run is in its history; WhenChanged: the last change of a register, global
        # or tensor element before now (see ``_when_changed``).
        self.register_query(ReadHistory, self._history)
        self.register_query(WhenChanged, self._when_changed)

    def on_opened(self) -> None:
        self.travel = TimeTravel(self.runner.context, self.controller, [self.runner.device])

    def _on_reverse(self, command: Reverse) -> None:
        travel = self.travel
        if travel is None or not travel.checkpoints:
            self.emit(Failed("no call is being recorded: start the program first"))
            return
        try:
            mode = ReverseMode(command.mode)
        except ValueError:
            self.emit(Failed(f"unknown reverse mode {command.mode!r}"))
            return
        if command.count < 1:
            self.emit(Failed(f"a step count is at least 1 (got {command.count})"))
            return
        # Where the move starts: inside the parked dispatch (a place of its command buffer), or at an
        # instruction boundary of the history.
        inside = self._parked_place() if self.run.parked else None
        try:
            if inside is not None:
                sequence, when = inside
                if mode in (ReverseMode.STEP, ReverseMode.NEXT):
                    self.abandon_run()
                    travel.invalidate()
                    position = travel.locate_dispatch(sequence).position
                    self._reverse_steps(travel, mode, command.count, position, inside)
                    return
                position = self._leave_dispatch(whole_instruction=True)[0]
                travel.goto(position)
                limit = place(position - 1, sequence, when)
            else:
                position = travel.position
                limit = place(position)
                if mode in (ReverseMode.STEP, ReverseMode.NEXT):
                    self._reverse_steps(travel, mode, command.count, position, None)
                    return
            matched: dict[tuple[int, str], tuple[Breakpoint, ...]] = {}
            if mode == ReverseMode.FINISH:
                stop = travel.reverse_finish()
            else:
                stop = travel.reverse_continue(self._dispatch_stop(inside, matched), limit)
            if stop.dispatch is not None and mode == ReverseMode.CONTINUE:
                self._land_on_hit(travel, stop, matched)
                return
        except TimeTravelError as e:
            self.emit(Failed(str(e), None, self.location()))
            return
        self._report_travel(stop)

    def _land_on_hit(
        self, travel: TimeTravel, hit: TravelStop, matched: dict[tuple[int, str], tuple[Breakpoint, ...]]
    ) -> None:
        """Report a breakpoint hit a reverse move found: at a dispatch, parked there (its tensors readable, the
        stop naming the breakpoints ``matched`` found there); else the instruction's stop."""
        if hit.dispatch is None:
            self._report_travel(hit)
            return
        when = str(hit.when or "before")
        self._park_in(travel, hit.dispatch.ordinal, when, breakpoints=matched.get((hit.dispatch.ordinal, when), ()))

    def _on_step(self, command: Step) -> None:
        if self.run.parked and self.gate.current is not None:
            self._stepped_out_of = self.gate.current.sequence
        super()._on_step(command)

    def _parked_place(self) -> tuple[int, str]:
        """The parked dispatch's device sequence and whether the run is parked before or after it."""
        info = self.gate.current_info
        return self.gate.current.sequence, str(info.when if info is not None else "before")

    def _reverse_steps(
        self, travel: TimeTravel, mode: ReverseMode, count: int, position: int, inside: tuple[int, str] | None
    ) -> None:
        """gdb's reverse-step/reverse-next, ``count`` times, with the dispatches of a command buffer as
        places of their own (``docs/ARCHITECTURE.md``, "Stops"). Inside an instruction that ran dispatches
        (one ``queue.execute`` runs a command buffer) a step goes back one dispatch place: after d -> before
        d -> before d-1 ... -> the instruction's start. From an instruction boundary a step goes back one
        instruction (over a call, for reverse-next); when the last step ends on an instruction that ran
        dispatches that the last forward step left from inside (it began parked in one of them) it ends
        inside it, after its last dispatch: the place that forward ``step`` left, so ``reverse-step K`` undoes
        ``step K`` and a forward command resumes after those dispatches instead of running them again; onto
        any other instruction it ends on the boundary, as a forward step from there runs the command buffer
        whole. Ends parked inside a dispatch (its bindings readable) or at an instruction
        boundary."""
        stop: TravelStop | None = None
        for k in range(count):
            if inside is not None:
                sequence, when = inside
                if when == "after":
                    inside = (sequence, "before")
                else:
                    first = travel.goto(position).dispatches  # the first dispatch the instruction ran
                    inside = (sequence - 1, "before") if sequence - 1 >= first else None
                continue
            if position <= travel.earliest:
                stop = travel.reverse_step(1)  # nothing earlier: history-start
                break
            ran = travel.goto(position).dispatches
            stop = travel.reverse_step(1) if mode == ReverseMode.STEP else travel.reverse_next(1)
            if stop.reason != "step":
                break
            if mode == ReverseMode.NEXT and position - stop.position > 1:
                # Back over a call: a breakpoint hit inside it stops the step there (gdb), as forward ``next``.
                matched: dict[tuple[int, str], tuple[Breakpoint, ...]] = {}
                hit = travel.breakpoint_between(stop.position, position, self._dispatch_stop(None, matched))
                if hit is not None:
                    self._land_on_hit(travel, hit, matched)
                    return
            hits = self.need_controller().breakpoints_at(self.runner.context.interpreter)
            if hits:  # gdb: a reverse step that reaches a breakpoint stops there, at the breakpoint
                stop = replace(stop, reason="breakpoint", breakpoints=hits)
                position = stop.position
                break
            left = self._stepped_out_of
            if (
                k == count - 1
                and position - stop.position == 1
                and left is not None
                and stop.dispatches <= left < ran
            ):
                inside = (ran - 1, "after")  # ends after the command buffer's last dispatch
            position = stop.position
        if inside is not None and (stop is None or stop.reason == "step"):
            self._park_in(travel, inside[0], inside[1], StopReason.STEP)
            return
        if stop is None or stop.position != position:
            stop = travel.goto(position)
        self._report_travel(stop)

    def _park_in(
        self,
        travel: TimeTravel,
        sequence: int,
        when: str,
        reason: StopReason | None = None,
        breakpoints: tuple[Breakpoint, ...] = (),
    ) -> None:
        """Replay into dispatch ``sequence`` and park there, before or after it ran (as the breakpoint that
        stopped it would have forward), so its bindings can be read and a forward command resumes from
        there; ``reason``: the stop's reason (``dispatch`` unless given); ``breakpoints``: those the stop
        names (found there by reverse-continue)."""
        travel.goto_dispatch(sequence, "before")
        # Before it, also to park after it: it runs again here, so a diverge breakpoint that fired there
        # judges it again and the stop carries its finding (the tensor, the errors), as the forward stop did.
        self.gate.rewind(sequence - self.gate.base)
        self.gate.quiet_below = sequence  # the dispatches replayed before it pass
        if when == "after":
            self.gate.park_after = sequence
        else:
            self.gate.stop_at_sequence = sequence
        self.park_reason, self.park_breakpoints = reason, breakpoints
        try:
            self.start_run(self.need_controller().continue_)
        finally:
            self.park_reason, self.park_breakpoints = None, ()

    def _on_travel_to(self, command: TravelTo) -> None:
        travel = self.travel
        if travel is None or not travel.checkpoints:
            self.emit(Failed("no call is being recorded: start the program first"))
            return
        if self.run.parked:
            self._leave_dispatch()
        try:
            if command.dispatch is not None and command.park and command.when == "after":
                # Parked after it ran: its outputs as it wrote them (where an input came from, say).
                self._park_in(travel, command.dispatch + self.gate.base, "after", StopReason.DISPATCH)
                return
            if command.dispatch is not None:
                stop = travel.goto_dispatch(command.dispatch + self.gate.base, command.when)
                if command.park and command.when == "before":
                    # Several dispatches can share the instruction (one command buffer): stop at this one.
                    self.gate.stop_at_sequence = stop.dispatch.ordinal
                    # ... and the dispatches replayed before it do not stop the travel at their breakpoints.
                    self.gate.quiet_below = stop.dispatch.ordinal
                    self.start_run(self.need_controller().continue_)
                    return
            elif command.position is not None:
                stop = travel.goto(command.position)
            else:
                raise TimeTravelError("travel where? a position or a dispatch")
        except TimeTravelError as e:
            self.emit(Failed(str(e), None, self.location()))
            return
        self._report_travel(stop)

    def _history(self, query: ReadHistory) -> History:
        """The recorded span and where the run is in it (instructions; dispatches as run ordinals)."""
        travel = self.travel
        if travel is None or not travel.checkpoints:
            return History(query, recording=False)
        inside = self.gate.current is not None
        if not inside:
            self._locate_marks(travel)
        return History(
            query,
            recording=True,
            position=None if inside else travel.position,
            earliest=travel.earliest,
            latest=travel.latest,
            memory_bytes=travel.memory_bytes,
            dispatches=tuple(
                DispatchMark(m.ordinal - self.gate.base, m.export_name, m.position, m.exact)
                for m in sorted(travel.dispatch_log.values(), key=lambda m: m.ordinal)
                if m.ordinal >= self.gate.base
            ),
        )

    @staticmethod
    def _locate_marks(travel: TimeTravel, seconds: float = 0.25) -> None:
        """Give the dispatches that ran inside fast runs their exact positions (for a timeline), latest
        first: one replay from a checkpoint places every dispatch before it in that interval too. Bounded
        in time: what is left keeps its run's start position (``exact`` False) until travelled to."""
        import time

        deadline = time.perf_counter() + seconds
        for ordinal in sorted(travel.dispatch_log, reverse=True):
            mark = travel.dispatch_log[ordinal]
            if mark.exact or mark.position < travel.earliest:
                continue
            if time.perf_counter() > deadline:
                break
            try:
                travel.locate_dispatch(ordinal)
            except TimeTravelError:
                continue

    def _when_changed(self, query: WhenChanged) -> LastChange:
        """The last change of a register (depth 0 = the call's entry frame), bytes of the primitive globals,
        a ref global, the contents of the buffer a ref global holds, or an element of the buffer view in a
        ref register. ``change`` None: no change in the recorded history."""
        travel = self.travel
        if travel is None or not travel.checkpoints:
            raise TimeTravelError("no call is being recorded")
        if isinstance(query.watch, WatchBinding):
            change, tensor_type = self._binding_change(query.watch)
        elif self.run.parked:
            raise TimeTravelError("inside a dispatch: step or continue out of it first")
        else:
            watch, tensor_type = self._engine_watch(query.watch)
            change = travel.last_change(watch)
        if change is None:
            return LastChange(query, None)
        watch = change.watch
        base = self.gate.base
        dispatch = None if change.dispatch is None else change.dispatch - base
        before, after, detail = _plain(change.before), _plain(change.after), ""
        if isinstance(query.watch, WatchGlobal) and query.watch.kind:
            before, after = (primitive_text(query.watch.kind, v) for v in (change.before, change.after))
        if isinstance(query.watch, WatchGlobalContents | WatchBinding | WatchRegisterContents):
            before, after, detail = describe_bytes_change(_bytes(change.before), _bytes(change.after), tensor_type)
            if change.allocated_at is not None:
                allocated = f"before: as allocated at instr. {change.allocated_at:,} (IREE leaves new memory undefined)"
                detail = f"{detail}; {allocated}" if detail else allocated
        via = ", written by ".join(w.describe(base, change.position) for w in change.via)
        last = change.via[-1] if change.via else None
        made_by = last.dispatch - base if last is not None and last.kind == "dispatch" and last.dispatch is not None else None
        return LastChange(
            query,
            Change(watch.describe(), change.position, change.module, change.function, change.pc, dispatch,
                   before, after, via, detail, made_by),  # fmt: skip
        )

    def _binding_change(self, w: WatchBinding) -> tuple[Any, TensorType | None]:
        """Where the bytes of a binding of the parked dispatch came from, as they were before it ran: the
        run leaves the dispatch, the history is searched back from it, and the run parks there again (a
        ``Stopped`` as it was)."""
        from engine.timetravel.watch import watch_bytes
        from engine.timetravel.when_changed import change_before_dispatch

        record, info = self.gate.current, self.gate.current_info
        if not self.run.parked or record is None or info is None:
            raise TimeTravelError("stop at a dispatch first: a binding is a paused dispatch's")
        bindings = record.bindings
        if not 0 <= w.binding < len(bindings):
            raise TimeTravelError(f"the dispatch has {len(bindings)} bindings; no binding {w.binding}")
        b = bindings[w.binding]
        if not (0 <= w.offset and 0 < w.length and w.offset + w.length <= b.length):
            raise TimeTravelError(f"cannot watch {w.describe()} of binding {w.binding} ({b.length} bytes)")
        try:
            watch = watch_bytes(b.buffer, b.offset + int(w.offset), int(w.length))
        except ValueError as e:
            raise TimeTravelError(f"cannot watch {w.describe()}: {e}") from e
        tensor_type = _elements(int(w.length), TensorType.parse(str(w.element)) if w.element else None)
        travel = self.travel
        assert travel is not None
        when = str(info.when)
        position, sequence = self._leave_dispatch()
        try:
            change = change_before_dispatch(travel, watch, position - 1, sequence)
        finally:
            travel.invalidate()
            self._park_in(travel, sequence, when, StopReason.DISPATCH)
        return change, tensor_type

    def _engine_watch(self, w: Watch) -> tuple[Any, TensorType | None]:
        """The time-travel engine's watch for a protocol one, with the tensor type of a global's buffer."""
        from engine.timetravel.watch import (
            GlobalWatch,
            RegisterWatch,
            watch_buffer,
            watch_bytes,
            watch_element,
        )

        travel = self.travel
        assert travel is not None
        # A global's module: the one the watch names, "" for the opened module (the CLI knows it by name only).
        module = str(getattr(w, "module", "")) or self._need_runner().context.main.name
        try:
            if isinstance(w, WatchRegister):
                return RegisterWatch(int(w.depth), str(w.bank), int(w.index)), None
            if isinstance(w, WatchGlobal):
                return GlobalWatch(module, int(w.offset), int(w.length)), None
            if isinstance(w, WatchGlobalRef):
                return GlobalWatch(module, int(w.index), ref=True), None
            if isinstance(w, WatchGlobalContents):
                _, buffer, tensor_type = self._need_globals().held(int(w.index))
                if w.length < 0:
                    return watch_buffer(buffer), tensor_type
                element = TensorType.parse(str(w.element)) if w.element else tensor_type
                return watch_bytes(buffer, int(w.offset), int(w.length)), _elements(int(w.length), element)
            if isinstance(w, WatchRegisterContents):
                t = travel.interpreter
                ref = t.frames[t.base + int(w.depth)].r[int(w.register)]
                ref = self._need_runner().storage_owner(ref) or ref  # an inline build's !vm.buffer storage
                if w.element < 0:
                    return watch_buffer(ref), _view_type(ref)
                watch = watch_element(ref, int(w.element))
                return watch, _elements(watch.length, _view_type(ref))
        except (IndexError, ValueError, TypeError, GlobalsError) as e:
            raise TimeTravelError(f"cannot watch {w.describe()}: {e}") from e
        raise TimeTravelError(f"unknown watch {type(w).__name__} (register, global, global ref, contents, element)")

    def stop_detail(self) -> StopDetail:
        detail = super().stop_detail()
        travel = self.travel
        if travel is not None and travel.checkpoints:
            base = self.gate.base
            recorded = sum(1 for ordinal in travel.dispatch_log if ordinal >= base)
            detail = replace(detail, latest=travel.latest, earliest=travel.earliest, recorded_dispatches=recorded)
            if self.gate.current is None:
                detail = replace(detail, position=travel.position)
        return detail

    def _leave_dispatch(self, whole_instruction: bool = False) -> tuple[int, int]:
        """Abandon the run parked inside a dispatch; the position just after its instruction, and the
        dispatch's ordinal on the device. ``whole_instruction``: replay the rest of that instruction (the
        command buffer's later dispatches) so the history reaches that position; a travel to a
        dispatch does not need it."""
        record = self.gate.current
        self.abandon_run()
        self.travel.invalidate()
        mark = self.travel.locate_dispatch(record.sequence, whole_instruction=whole_instruction)
        return mark.position + 1, record.sequence

    def _dispatch_stop(self, inside: tuple[int, str] | None, matched: dict[tuple[int, str], tuple[Breakpoint, ...]]):
        """The dispatch breakpoints (NaN and diverge stops too) of the session as a reverse-continue
        predicate; ``matched`` gets the breakpoints of each hit, by (device sequence, when). NaN is judged as
        forward (``engine.session.nonfinite``): on a snapshot of the replayed dispatch."""
        bps = tuple(bp for bp in self.breakpoints if bp.kind in (BreakpointKind.DISPATCH, BreakpointKind.NAN))
        diverged = self._diverge_hit()
        if not bps and diverged is None:
            return None
        nan = any(bp.kind == BreakpointKind.NAN for bp in bps)
        snapshots = _ReplayedSnapshots(self.snapshots)

        def stop(record: DispatchRecord, when: str) -> bool:
            if inside is not None and place(0, record.sequence, when) >= place(0, *inside):
                return False  # where the run was parked, or later
            ordinal = self.gate.ordinal(record)
            executable = executable_name(record)
            hits = [bp for bp in bps if dispatch_matches(bp, ordinal, executable, record.export_name, when)]
            if diverged is not None and ordinal == diverged and when == "after":
                hits += [bp for bp in self.breakpoints if bp.kind == BreakpointKind.DIVERGE]
            snapshot = snapshots.see(record, when) if nan else None
            if snapshot is not None and nonfinite_written(snapshot):
                hits += [bp for bp in bps if bp.kind == BreakpointKind.NAN]
            if hits:
                matched[(record.sequence, when)] = tuple(hits)
            return bool(hits)

        return stop

    def _diverge_hit(self) -> int | None:
        """The run ordinal where a diverge breakpoint fired (the dispatches after it inherit the difference,
        so judging them again would name the last, not the first). One set after its dispatches ran has not
        judged them: the history is replayed from its start, in order, for it to judge them as it would have
        forward (gdb judges a condition set late on the hits it finds going back)."""
        if not any(bp.kind == BreakpointKind.DIVERGE for bp in self.breakpoints):
            return None
        travel = self.travel
        here, base = travel.position, self.gate.base
        ran = [o - base for o, mark in travel.dispatch_log.items() if o >= base and mark.position < here]
        if self.gate.diverge_unjudged(ran):
            snapshots = _ReplayedSnapshots(self.snapshots)

            def judge(record: DispatchRecord, when: str) -> None:
                snapshot = snapshots.see(record, when)
                if snapshot is not None:
                    self.gate.judge_replayed(snapshot)

            travel.replay_dispatches(judge)
        return self.gate.first_diverged()

    def _report_travel(self, stop: TravelStop) -> None:
        self.gate.rewind(stop.dispatches - self.gate.base)  # what is ahead again may stop the run again
        location = self.location()
        if stop.dispatch is not None:
            record_like = _MarkRecord(stop.dispatch.export_name, stop.dispatch.executable)
            info = self.gate.info(record_like, stop.when or "before")  # type: ignore[arg-type]
            info = replace(info, ordinal=stop.dispatch.ordinal - self.gate.base)
            frames = location.frames
            top = self.runner.context.interpreter.top
            if stop.when == "after" and top is not None and frames:
                # As a forward stop inside the dispatch reports it: at the call instruction that ran it.
                pc = self.call_pc(top.instance, top.ordinal, top.pc)
                frames = (*frames[:-1], self.frame_info(top.instance, top.ordinal, pc))
            location = replace(
                location,
                frames=frames,
                dispatch=stop.dispatch.export_name,
                dispatch_index=info.ordinal,
                dispatch_info=info,
            )
        detail = replace(self.stop_detail(), breakpoints=self.describe_hits(stop.breakpoints))
        self.emit(Stopped(stop.reason, location, detail))


def _view_type(ref: Any) -> TensorType | None:
    """The tensor type of a buffer view whose buffer is exactly its elements (None for a plain buffer, or an
    element type numpy cannot read)."""
    if not isinstance(ref, HalBufferView):
        return None
    try:
        found = TensorType(ref.shape, ref.element.name, "trace")
        size = found.element_count * found.dtype.itemsize
    except ValueError:
        return None
    return found if size == ref.buffer.byte_length else None


def _elements(length: int, element: TensorType | None) -> TensorType | None:
    """``length`` bytes as a row of ``element``'s elements (None: no element type, or not a whole number)."""
    if element is None or length % element.dtype.itemsize:
        return None
    return TensorType((length // element.dtype.itemsize,), element.element)


def _bytes(value: Any) -> bytes | None:
    return value if isinstance(value, bytes) else None  # watch.ABSENT: the buffer did not exist


def _plain(value: Any) -> Any:
    """A watched value as plain data: ints stay, bytes become hex, refs their type name."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple):  # watch.ABSENT: the frame or buffer did not exist
        return None
    if isinstance(value, int):
        return value
    ref = getattr(value, "ref", value)
    return None if ref is None else str(getattr(ref, "vm_type_name", type(ref).__name__))


class _ReplayedSnapshots:
    """Snapshots of dispatches a replay runs: the bindings' bytes kept before each, the snapshot handed out
    after it ran (None before it, or when its before was not seen)."""

    def __init__(self, sources_of):
        self._sources_of = sources_of
        self._pending: dict[int, DispatchSnapshot] = {}

    def see(self, record: DispatchRecord, when: str) -> DispatchSnapshot | None:
        if when == "before":
            before = tuple(np.array(b.data, copy=True) for b in record.bindings)
            sources = self._sources_of
            self._pending[record.sequence] = DispatchSnapshot(record, before, lambda: sources.sources)
            return None
        snapshot = self._pending.pop(record.sequence, None)
        if snapshot is not None:
            snapshot.ran = True
        return snapshot


@dataclass(frozen=True)
class _MarkRecord:
    """Enough of a ``DispatchRecord`` for ``DispatchGate.info`` (no bindings: the dispatch is not running)."""

    export_name: str
    executable: str
    sequence: int = 0
    device: str = ""
    workgroup_count: tuple = (0, 0, 0)
    constants: tuple = ()
    bindings: tuple = ()


__all__ = ["TimeTravelSession"]
