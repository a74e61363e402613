"""Where dispatches happened in the history: ``DispatchMark`` and the observer that records them.

The observer sits first on each device (before a session's gate, which may park the run inside the
dispatch), so every dispatch has its mark when anyone looks. Inside a fast ``run`` the position is that
of the run's start, so such marks are not ``exact``; ``TimeTravel.locate_dispatch`` replays to find the
instruction. During searches of the history it also asks a predicate whether a dispatch is a stop, and
calls a hook (the watch search reads values around each dispatch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.runtime.hal.device import DispatchObserver, DispatchRecord, HalExecutable

if TYPE_CHECKING:
    from engine.timetravel.engine import TimeTravel


@dataclass(frozen=True)
class DispatchMark:
    """Dispatch ``ordinal`` ran inside the instruction at ``position`` (when ``exact``; otherwise inside a
    fast run that started at ``position``, and ``TimeTravel.locate_dispatch`` finds the instruction)."""

    ordinal: int
    position: int
    export_name: str
    executable: str
    exact: bool = True


class DispatchLocated(Exception):
    """Raised out of a dispatch to end a replay that only looked for where it ran."""


DispatchStop = Callable[[DispatchRecord, str], bool]  # (record, "before"|"after") -> stop there?


class MarkingObserver(DispatchObserver):
    """Logs each dispatch's position; during a scan, also asks a predicate whether it is a stop."""

    def __init__(self, travel: TimeTravel):
        self.travel = travel
        self.predicate: DispatchStop | None = None
        self.hits: list[tuple[int, str]] = []  # (ordinal, "before"|"after")
        self.hook: Callable[[DispatchRecord, str], None] | None = None
        # ``TimeTravel.locate_dispatch``: once this dispatch has its exact mark, the replay is cut short
        # (``located`` set, ``DispatchLocated`` raised out of the dispatch).
        self.locating: int | None = None
        self.located = False

    def _mark(self, record: DispatchRecord) -> DispatchMark:
        t = self.travel
        mark = t.dispatch_log.get(record.sequence)
        exact = t.interpreter.run_budget <= 1
        if mark is None or exact and not mark.exact:
            mark = DispatchMark(
                record.sequence, t.interpreter.position, record.export_name, record.executable, exact
            )
            t.dispatch_log[record.sequence] = mark
        return mark

    def _see(self, record: DispatchRecord, when: str) -> None:
        mark = self._mark(record)
        if self.locating is not None and record.sequence == self.locating and mark.exact:
            self.located = True
            raise DispatchLocated(record.sequence)
        if self.hook is not None:
            self.hook(record, when)
        if self.predicate is not None and self.predicate(record, when):
            self.hits.append((record.sequence, when))

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        # Marks need no bytes: a batch's dispatches are marked afterwards (``dispatch_batch``), all inside the
        # same instruction. A scan, a hook or a locate looks at each dispatch on its own.
        return self.predicate is not None or self.hook is not None or self.locating is not None

    def dispatch_batch(self, records: list[DispatchRecord], start_ns: int, end_ns: int) -> None:
        for record in records:
            self._mark(record)

    def before_dispatch(self, record: DispatchRecord) -> None:
        self._see(record, "before")

    def after_dispatch(self, record: DispatchRecord) -> None:
        self._see(record, "after")
