"""Dispatch breakpoints: which dispatches a run stops at, and what the session reports about one.

The HAL runs each dispatch synchronously on the thread that runs the program and tells its observers
before and after (``engine.runtime.hal.device``). ``DispatchGate`` subscribes to the device's one
snapshot observer (``engine.dispatch.snapshot``: the bindings are copied at most once, whoever watches):
it numbers the run's dispatches (the *run ordinal*, from 0 at the start of each call), matches them with
the dispatch breakpoints (by ordinal, by IREE's executable or export name with globs, every one, before or
after it runs; NaN/Inf written), and when one matches calls ``park``, which blocks the run thread until
the client resumes it. Bindings stay readable while it is blocked (the device is idle).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshot, SnapshotSubscriber
from engine.runtime.hal.commands import DispatchCommand
from engine.runtime.hal.device import DispatchRecord, HalExecutable
from engine.session.nonfinite import nonfinite_written
from engine.session.protocol import (
    INITIALIZER,
    BindingInfo,
    Breakpoint,
    BreakpointKind,
    DispatchInfo,
    DispatchWhen,
    DivergenceStop,
    NonFinite,
)


def is_dispatch_breakpoint(bp: Breakpoint) -> bool:
    return bp.kind in (BreakpointKind.DISPATCH, BreakpointKind.NAN, BreakpointKind.DIVERGE)


def name_matches(pattern: str, executable: str, export: str) -> bool:
    """IREE's name of a dispatch is its export (``main_dispatch_0_matmul_4x16x8_f32``) or its executable
    (``main_dispatch_0``, also spelled ``module.executable``); globs (``*softmax*``) match either."""
    if pattern == "*":
        return True
    names = (export, executable, executable.rsplit(".", 1)[-1], f"{executable}::{export}")
    return any(fnmatch.fnmatchcase(n, pattern) for n in names if n)


def dispatch_matches(bp: Breakpoint, ordinal: int, executable: str, export: str, when: str) -> bool:
    if bp.kind != BreakpointKind.DISPATCH or str(bp.when) != str(when):
        return False
    if bp.ordinal is not None:
        return bp.ordinal == ordinal and (bp.dispatch is None or name_matches(bp.dispatch, executable, export))
    return name_matches(bp.dispatch or "*", executable, export)


def module_dispatch_names(module) -> tuple[str, ...] | None:
    """The export names of every dispatch the module's host code records (``hal.command_buffer.dispatch``
    call sites), or None when one call site's export is not known statically (then any name may run)."""
    from engine.runtime.vmfb.call_sites import dispatch_call_sites

    sites = dispatch_call_sites(module)
    if any(site.export is None for site in sites):
        return None
    return tuple(dict.fromkeys(site.export for site in sites))


def unmatchable(bp: Breakpoint, names: tuple[str, ...] | None, module: str = "the module") -> str | None:
    """Why ``bp`` can never stop a run of a module whose dispatches are ``names`` (``module_dispatch_names``),
    or None when it can (or it is not known)."""
    if bp.kind != BreakpointKind.DISPATCH or bp.dispatch is None or names is None:
        return None
    if any(name_matches(bp.dispatch, export_executable(n), n) for n in names):
        return None
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (
        f"break dispatch {bp.dispatch}: no dispatch of {module} is named so (IREE's export or executable names, "
        f"globs allowed; its dispatches: {shown or 'none'})"
    )


def export_executable(export: str) -> str:
    """IREE's executable name of an export name: up to its ``_dispatch_N`` part (``main_dispatch_0``), as
    ``--iree-flow-trace-dispatch-tensors`` keys spell it; the export name when it has no such part."""
    marker = export.find("_dispatch_")
    if marker < 0:
        return export
    end = marker + len("_dispatch_")
    while end < len(export) and export[end].isdigit():
        end += 1
    return export[:end]


def executable_name(record: DispatchRecord) -> str:
    """IREE's executable name of a dispatch (``export_executable`` of its export name)."""
    return export_executable(record.export_name)


@dataclass(frozen=True)
class GateStop:
    """Why the gate stops at a dispatch: the breakpoints that matched, NaN written, a dispatch step."""

    breakpoints: tuple[Breakpoint, ...] = ()
    nan_bindings: tuple[int, ...] = ()
    step: bool = False
    paused: bool = False
    divergence: DivergenceStop | None = None  # a diverge breakpoint's finding
    nonfinite: tuple[NonFinite, ...] = ()  # what was written, per tensor or binding (engine.session.nonfinite)


class DispatchGate(SnapshotSubscriber):
    """The session's subscriber to the device's dispatch snapshots (``engine.dispatch.snapshot``).
    ``park(record, info, stop)`` blocks until resumed."""

    def __init__(
        self,
        park: Callable[[DispatchRecord, DispatchInfo, GateStop], None],
        pause_requested: Callable[[], bool],
        progress: Callable[[DispatchRecord], None],
        pause_pending: Callable[[], bool] | None = None,
        batch_progress: Callable[[int, Sequence[DispatchCommand]], None] | None = None,
        progress_per_dispatch: Callable[[], bool] | None = None,
    ):
        self.park = park
        self.pause_requested = pause_requested  # takes the pause (True once)
        # Whether a pause is asked for, without taking it (``watches``); None: never known ahead.
        self.pause_pending = pause_pending
        # Told before a native batch runs: the run ordinal of its first dispatch and its dispatch commands
        # (with the device's progress cell, what names the dispatch a crash in the batch happened in).
        self.batch_progress = batch_progress
        # Whether ``progress`` must be told before every dispatch (a session served over a stream reports
        # progress but its client cannot read a progress cell): then every dispatch is watched.
        self.progress_per_dispatch = progress_per_dispatch
        self.progress = progress  # told before each dispatch (a crash in its kernel is attributed to it)
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self.stop_at_next = False  # a "next dispatch" step: stop before the next one
        # Stop before the first dispatch whose device sequence is at least this (time travel parks in one
        # dispatch of a command buffer it replays); cleared when it stops.
        self.stop_at_sequence: int | None = None
        # Travelling to a dispatch replays the instruction that ran it, and with it the dispatches before it in
        # the same command buffer: those (device sequence below this) are passed over, breakpoints and all.
        self.quiet_below: int | None = None
        # Parking in a dispatch after it ran (a reverse stop "after" it, replayed): its device sequence.
        self.park_after: int | None = None
        self.base = 0  # the device's dispatch count when the current call began
        self.current: DispatchRecord | None = None
        self.current_info: DispatchInfo | None = None
        self.snapshot: DispatchSnapshot | None = None  # the current dispatch's (its bytes, its tensors)
        self._buffers: dict[int, int] = {}
        # Diverge breakpoints: their reference runs (engine.dispatch.diverge_condition), by breakpoint.
        self._references: dict[Breakpoint, object] = {}
        self.parameters = None  # the ParameterArchives of the session's module: a module reference loads them too
        self._call: tuple[str, tuple[str, ...]] | None = None
        # The calls this module instance ran before the current one (a diverge reference replays them: a
        # stateful program's call N starts from what they left), and the first left before its end.
        self.calls_leave_state = False  # the session's module stores globals in its calls (the session sets it)
        self._earlier_calls: list[tuple[str, tuple[str, ...]]] = []
        self._left_unfinished: str | None = None
        self._call_ended = False
        self._unready: set[Breakpoint] = set()  # diverge breakpoints set after a call they cannot judge
        self._diverged: set[Breakpoint] = set()  # fired in this call: later dispatches inherit the difference

    @property
    def breakpoints(self) -> tuple[Breakpoint, ...]:
        return self._breakpoints

    @breakpoints.setter
    def breakpoints(self, value: tuple[Breakpoint, ...]) -> None:
        # What each dispatch asks of the breakpoints is worked out once here, not per dispatch.
        self._breakpoints = tuple(value)
        self._watch_nan = any(bp.kind == BreakpointKind.NAN for bp in self._breakpoints)
        self._after_breakpoints = any(
            bp.kind == BreakpointKind.DISPATCH and str(bp.when) == DispatchWhen.AFTER for bp in self._breakpoints
        )
        self._has_diverge = any(bp.kind == BreakpointKind.DIVERGE for bp in self._breakpoints)
        self._before_breakpoints = any(
            bp.kind == BreakpointKind.DISPATCH and str(bp.when) == DispatchWhen.BEFORE for bp in self._breakpoints
        )
        # What ``watches`` asks of the dispatch breakpoints: their run ordinals, and those that match names.
        dispatch = tuple(bp for bp in self._breakpoints if bp.kind == BreakpointKind.DISPATCH)
        self._watch_ordinals = frozenset(bp.ordinal for bp in dispatch if bp.ordinal is not None)
        self._watch_names = tuple(bp.dispatch or "*" for bp in dispatch if bp.ordinal is None)
        self._watched_names: dict[tuple[HalExecutable, int], bool] = {}  # (executable, export ordinal) -> matches

    def begin_call(self, dispatch_count: int, function: str | None = None, inputs: tuple[str, ...] = ()) -> None:
        self.base = dispatch_count
        self.stop_at_next = False
        self.stop_at_sequence = None
        self.quiet_below = None
        self.park_after = None
        self._buffers.clear()
        self._diverged.clear()
        if function is not None:
            self._remember_previous_call()
            self._call = (function, tuple(inputs))
            self._call_ended = False
            try:
                for bp in self._diverge_breakpoints(judging=False):
                    self._reference(bp, prepare=True)  # a module reference runs now: an error fails the call, named
            except BaseException:
                self._call = None  # the call does not run: it leaves no state
                raise

    def end_call(self) -> None:
        """The current call returned: the state it leaves is the whole call's."""
        self._call_ended = True

    def _remember_previous_call(self) -> None:
        if self._call is None:
            return
        function, inputs = self._call
        if not self._call_ended:
            if self._left_unfinished is None:
                self._left_unfinished = f"call {len(self._earlier_calls) + 1}, {function}"
        elif function != INITIALIZER:  # a module reference runs its initializer as it loads
            self._earlier_calls.append((function, inputs))

    def check_reference(self, bp: Breakpoint) -> None:
        """Read a diverge breakpoint's reference now (a ``DivergeError`` says why it is not a capture bundle
        or a module), so a bad one is refused when it is set rather than when a run begins."""
        if bp.kind == BreakpointKind.DIVERGE:
            self._reference(bp)

    def _diverge_breakpoints(self, judging: bool = True) -> tuple[Breakpoint, ...]:
        """The diverge breakpoints that have not fired in this call; ``judging``: only those ready to judge it
        (not one set after the call that cannot judge it)."""
        if not self._has_diverge:
            return ()
        return tuple(bp for bp in self.breakpoints if bp.kind == BreakpointKind.DIVERGE and bp not in self._diverged
                     and not (judging and bp in self._unready))  # fmt: skip

    def _reference(self, bp: Breakpoint, prepare: bool = False):
        """The breakpoint's reference; ``prepare``: a call begins (its verdicts start afresh, a module
        reference is captured for the call's inputs)."""
        from engine.dispatch.diverge_condition import CallHistory, DivergeError, DivergeReference

        ref = self._references.get(bp)
        if ref is None:
            ref = self._references[bp] = DivergeReference(bp.reference or "", bp.atol, bp.rtol,
                                                          parameters=self.parameters)  # fmt: skip
            prepare = True
        if prepare and self._call is not None:
            earlier = CallHistory(tuple(self._earlier_calls), self._left_unfinished) if self.calls_leave_state else None
            try:
                ref.prepare(*self._call, earlier)
                self._unready.discard(bp)
            except DivergeError:
                if not self._call_ended:
                    raise
                # Set after a call it cannot judge (a bundle of another call of a program that keeps state):
                # it judges from the next call on, which prepares it again (and fails, named, if it still cannot).
                self._unready.add(bp)
        return ref

    def diverge_verdicts(self) -> tuple[tuple[int, str], ...]:
        """(ordinal, verdict) of each dispatch the diverge breakpoints judged in the current call (the least
        agreeing where several judged one; ``numerics.BYTES_DIFFER`` where untyped bytes differ and no typed
        judgement found it diverged)."""
        from engine.dispatch.numerics import BYTES_DIFFER, Verdict, worst_verdict

        found: dict[int, list] = {}
        for bp in self.breakpoints:
            ref = self._references.get(bp) if bp.kind == BreakpointKind.DIVERGE else None
            for o, v in (ref.verdicts.items() if ref is not None else ()):
                found.setdefault(o, []).append(v)

        def verdict(vs: list) -> str:
            judged = worst_verdict(v for v in vs if v != BYTES_DIFFER)
            return BYTES_DIFFER if BYTES_DIFFER in vs and judged is not Verdict.DIVERGED else str(judged)

        return tuple((o, verdict(vs)) for o, vs in sorted(found.items()))

    def rewind(self, ordinal: int) -> None:
        """The run went back to before dispatch ``ordinal`` (a run ordinal) ran: a diverge breakpoint that fired
        there or later fires again when the run passes it forward (gdb: a breakpoint ahead is ahead). The call is
        not ended any more: the module's state is part way until it returns again."""
        self._call_ended = False
        for bp in list(self._diverged):
            ref = self._references.get(bp)
            fired = [o for o, v in (ref.verdicts.items() if ref is not None else ()) if str(v) == "diverged"]
            if not fired or min(fired) >= ordinal:
                self._diverged.discard(bp)

    def diverge_unjudged(self, ordinals: Iterable[int]) -> bool:
        """Whether a diverge breakpoint that has not fired in this call has not judged some of the dispatches
        ``ordinals`` (run ordinals): it was set after they ran, and reverse execution judges them first."""
        pending = self._diverge_breakpoints()
        wanted = set(ordinals)
        return any(not wanted <= set(self._reference(bp).verdicts) for bp in pending)

    def judge_replayed(self, snapshot: DispatchSnapshot) -> None:
        """A dispatch replayed from the history, in the order the run ran them, judged by the diverge
        breakpoints that had not judged it: each fires at the first that diverges, as it would have forward
        (then ``first_diverged`` names it, and the run does not stop there again going forward)."""
        ordinal = self.ordinal(snapshot.record)
        for bp in self._diverge_breakpoints():
            reference = self._reference(bp)
            if ordinal not in reference.verdicts and reference.check_dispatch(ordinal, snapshot) is not None:
                self._diverged.add(bp)

    def first_diverged(self) -> int | None:
        """The run ordinal of the dispatch where a diverge breakpoint fired in the current call (the first it
        judged diverged: the later ones inherit the difference), or None: where reverse execution finds it."""
        found = [o for o, v in self.diverge_verdicts() if v == "diverged"]
        return min(found) if found else None

    def diverge_exports(self) -> tuple[tuple[int, str], ...]:
        """(ordinal, live export name) of each dispatch in ``diverge_verdicts``."""
        found: dict[int, str] = {}
        for bp in self.breakpoints:
            ref = self._references.get(bp) if bp.kind == BreakpointKind.DIVERGE else None
            found.update(ref.exports if ref is not None else {})
        return tuple(sorted(found.items()))

    def ordinal(self, record: DispatchRecord) -> int:
        return record.sequence - self.base

    # -- what is reported

    def info(self, record: DispatchRecord, when: str, access: tuple[str, ...] | None = None) -> DispatchInfo:
        bindings = []
        for k, b in enumerate(record.bindings):
            allocation = b.buffer.allocation
            number = self._buffers.setdefault(id(allocation), len(self._buffers))
            try:
                start, length = b.buffer.resolve(b.offset, b.length)
            except Exception:  # an invalid range is reported by the dispatch itself
                start, length = b.offset, b.length
            label = f"buffer{number}" + (f" ({allocation.origin})" if allocation.origin else "")
            bindings.append(
                BindingInfo(b.index, label, int(start), int(length), access[k] if access else "unknown")
            )
        return DispatchInfo(
            ordinal=self.ordinal(record),
            executable=executable_name(record),
            export=record.export_name,
            workgroup_count=tuple(int(x) for x in record.workgroup_count),  # type: ignore[arg-type]
            constants=tuple(int(c) for c in record.constants),
            bindings=tuple(bindings),
            when=DispatchWhen(when),
            device=record.device,
        )

    def _matching(self, record: DispatchRecord, when: str) -> tuple[Breakpoint, ...]:
        if not self._breakpoints:
            return ()
        if when == DispatchWhen.BEFORE and not self._before_breakpoints:
            return ()
        if when == DispatchWhen.AFTER and not self._after_breakpoints:
            return ()
        ordinal = self.ordinal(record)
        executable = executable_name(record)
        return tuple(
            bp for bp in self.breakpoints if dispatch_matches(bp, ordinal, executable, record.export_name, when)
        )

    def _wants_after(self, record: DispatchRecord) -> bool:
        return (
            self._watch_nan
            or bool(self._diverge_breakpoints())
            or bool(self._matching(record, DispatchWhen.AFTER))
            or record.sequence == self.park_after
        )

    # -- the subscriber

    def _passed_over(self, record: DispatchRecord) -> bool:
        """A dispatch replayed on the way to a travelled-to one (``quiet_below``): no stop, no bytes."""
        return self.quiet_below is not None and record.sequence < self.quiet_below

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        """Whether this dispatch can stop the run, known before it runs: a dispatch step is pending, a pause is
        asked for, it is the one to park after, NaN or divergence is armed (they judge every dispatch while
        armed), or an ordinal/name breakpoint (before or after) matches it. Never one passed over on the way
        to a travelled-to dispatch (``quiet_below``). The rest run in native batches (``batch_starting``
        tells the session which, for its progress)."""
        # Asked once per dispatch command of every submission: the cheap questions first.
        quiet = self.quiet_below
        if quiet is not None and sequence < quiet:
            return False
        if self.stop_at_next or self.park_after == sequence or self._watch_nan:
            return True
        if self._has_diverge and self._diverge_breakpoints():
            return True
        if self.stop_at_sequence is not None and sequence >= self.stop_at_sequence:
            return True
        if self.pause_pending is not None and self.pause_pending():
            return True
        if self.progress_per_dispatch is not None and self.progress_per_dispatch():
            return True
        if sequence - self.base in self._watch_ordinals:
            return True  # (an ordinal breakpoint that also names a dispatch is checked when it runs)
        if not self._watch_names:
            return False
        key = (executable, ordinal)
        found = self._watched_names.get(key)
        if found is None:
            export = executable.export_name(ordinal)
            name = export_executable(export)
            found = self._watched_names[key] = any(name_matches(p, name, export) for p in self._watch_names)
        return found

    def first_watched(self, dispatches: Sequence[DispatchCommand], start: int, end: int, first_sequence: int) -> int:
        """``watches`` for a stretch at once when only ordinal breakpoints are armed (the common case of a run
        continued to a breakpoint): the first armed ordinal in the stretch, no question per dispatch."""
        if (
            self.quiet_below is not None
            or self.stop_at_next
            or self.park_after is not None
            or self.stop_at_sequence is not None
            or self._watch_nan
            or self._has_diverge
            or self._watch_names
            or (self.pause_pending is not None and self.pause_pending())
            or (self.progress_per_dispatch is not None and self.progress_per_dispatch())
        ):
            return super().first_watched(dispatches, start, end, first_sequence)
        first_ordinal = first_sequence - self.base
        last_ordinal = first_ordinal + (end - start)
        hits = [o for o in self._watch_ordinals if first_ordinal <= o < last_ordinal]
        return start + (min(hits) - first_ordinal) if hits else end

    def batch_starting(self, dispatches: Sequence[DispatchCommand], first_sequence: int) -> None:
        if self.batch_progress is not None:
            self.batch_progress(first_sequence - self.base, dispatches)

    def wants_before(self, record: DispatchRecord) -> bool:
        if not (self._watch_nan or self._has_diverge or self._after_breakpoints or self.park_after is not None):
            return False  # nothing to check after any dispatch (the common case: no per-dispatch work)
        if self._passed_over(record):
            return False
        # What an "after" stop needs to know what the dispatch wrote.
        return self._wants_after(record)

    def before(self, snapshot: DispatchSnapshot) -> None:
        record = snapshot.record
        self.current = record
        self.snapshot = snapshot
        self.progress(record)
        if self.quiet_below is not None:
            if self._passed_over(record):
                return
            self.quiet_below = None
        if record.sequence == self.park_after:
            return  # travelling to the place after it: no stop before it
        hit = self._matching(record, DispatchWhen.BEFORE)
        step = self.stop_at_next or (self.stop_at_sequence is not None and record.sequence >= self.stop_at_sequence)
        paused = self.pause_requested()
        if hit or step or paused:
            self.stop_at_next = False
            self.stop_at_sequence = None
            self.current_info = self.info(record, DispatchWhen.BEFORE)
            self.park(record, self.current_info, GateStop(hit, (), step, paused))
            if not snapshot.before and self._wants_after(record):
                # A breakpoint set while parked here stops after this dispatch (break dispatch N after, nan,
                # diverge): its after stop judges what the dispatch wrote against its bytes before, which were
                # not copied when it began (nothing was armed to look after it). They are still those now.
                snapshot.before = tuple(np.array(b.data, copy=True) for b in record.bindings)

    def after(self, snapshot: DispatchSnapshot) -> None:
        record = snapshot.record
        try:
            if not snapshot.before or self._passed_over(record) or not self._wants_after(record):
                return
            # NaN/Inf judged once on the snapshot: the outputs it wrote, typed (engine.session.nonfinite).
            nonfinite = nonfinite_written(snapshot) if self._watch_nan else ()
            nan = tuple(sorted({f.binding for f in nonfinite}))
            hit = self._matching(record, DispatchWhen.AFTER)
            if nan:
                hit = hit + tuple(bp for bp in self.breakpoints if bp.kind == BreakpointKind.NAN)
            divergence = None
            for bp in self._diverge_breakpoints():
                # What it wrote and what it updated in place (a packed slab: readwrite), judged on the bytes
                # the dispatch defined (engine.dispatch.diverge_condition).
                reference = self._reference(bp)
                found = reference.check_dispatch(self.ordinal(record), snapshot)
                if found is not None:
                    self._diverged.add(bp)
                    plain = found.to_json()
                    plain["first_mismatch"] = found.first_mismatch
                    verdicts = self.diverge_verdicts()
                    hit = hit + (bp,)
                    divergence = DivergenceStop(**plain, text=found.describe(), verdicts=verdicts)
                    break
            step = record.sequence == self.park_after
            if step:
                self.park_after = None
            if hit or step:
                # Reported as far as the bytes tell which binding wrote (two bindings over one buffer: unknown).
                self.current_info = self.info(record, DispatchWhen.AFTER, snapshot.attributed_access())
                stop = GateStop(hit, nan, step=step, divergence=divergence, nonfinite=nonfinite)
                self.park(record, self.current_info, stop)
        finally:
            self.current = None
            self.current_info = None
            self.snapshot = None

    def failed(self, snapshot: DispatchSnapshot, error: Exception) -> None:
        # A failure report names the dispatch that failed (one inside a batch was never ``before``).
        self.current = snapshot.record


__all__ = [
    "DispatchGate",
    "GateStop",
    "dispatch_matches",
    "executable_name",
    "export_executable",
    "module_dispatch_names",
    "unmatchable",
    "is_dispatch_breakpoint",
    "name_matches",
]
