"""Progress and cancellation for long engine jobs (compiles): a plain object the job polls and reports to.

The job is a plain function taking an immutable request and a ``TaskState``; the GUI runs it on a worker
thread and calls ``cancel()`` from anywhere, tests call it synchronously (Orange3's ``TaskState``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import CompileCancelled


@dataclass(frozen=True)
class Progress:
    """One progress report: the last phase the compiler finished (``None`` before the first one)."""

    phase: str | None
    phase_index: int  # 1-based index in PHASES, 0 before the first phase
    phases_total: int  # len(PHASES)
    elapsed_s: float
    message: str = ""


class TaskState:
    """Shared between a job and whoever started it: ``cancel()`` asks the job to stop, ``on_progress`` hears it.

    ``on_progress`` is called on the job's thread; a GUI must re-post it to its own thread.
    """

    def __init__(self, on_progress: Callable[[Progress], None] | None = None):
        self._cancel = threading.Event()
        self._on_progress = on_progress
        self.last_progress: Progress | None = None

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def report(self, progress: Progress) -> None:
        self.last_progress = progress
        if self._on_progress is not None:
            self._on_progress(progress)

    def check(self) -> None:
        """Raise ``CompileCancelled`` once the job was cancelled (for jobs that poll between steps)."""
        if self._cancel.is_set():
            raise CompileCancelled("cancelled")

    def progress(self, fraction: float, message: str = "") -> None:
        """Report progress that is not a compiler phase: ``fraction`` of the work done, and what."""
        total = 1000
        self.report(Progress(None, round(max(0.0, min(1.0, fraction)) * total), total, 0.0, message))

    @property
    def fraction(self) -> float:
        """The last reported progress as a fraction of the whole (0 before any report)."""
        p = self.last_progress
        return p.phase_index / p.phases_total if p is not None and p.phases_total else 0.0
