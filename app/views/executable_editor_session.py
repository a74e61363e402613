"""The executable editor's actions through the window's debug session (``SessionBridge``): Apply, Revert and
Export whenever the session holds the module (paused or between runs: they change what every later run
executes), Rerun and Benchmark when the run is paused at a dispatch. They are the session's substitution
queries (``Substitute``, ``RerunDispatch``... in ``engine.session.protocol``), answered by the session process. A
faulting edited kernel takes down only that process (the bridge restarts it and reports the crash); the
edit stays in the editor and in its draft file. Answers arrive as typed ``Answer`` events; this object
matches them to the query waiting (an answer carries its query).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from engine.session.protocol import Answer, Query, SubstitutionRefused
from engine.substitute.errors import SourceDiagnostic


def paused_at_dispatch(workbench) -> bool:
    """The window's run (``Workbench.state``) is paused at a dispatch."""
    return workbench is not None and workbench.state.paused is not None


def diagnostics_of(refused: SubstitutionRefused) -> list[SourceDiagnostic]:
    return [SourceDiagnostic(d.path, d.line, d.column, d.severity, d.message) for d in refused.diagnostics]


class SessionSubstitutions(QObject):
    """Substitution queries to the bridge, one at a time; ``done(answer)`` or ``failed(text, refused)``."""

    done = Signal(object)  # the typed answer (its TensorRefs already read into numpy arrays)
    failed = Signal(str, object)  # text, the SubstitutionRefused (or None: a crash, a lost session)

    def __init__(self, bridge, parent: QObject | None = None, workbench=None):
        super().__init__(parent)
        self.bridge = bridge
        self.workbench = workbench  # the window's run state (what the run is paused at); None: never paused
        self.waiting: Query | None = None
        self._then: Callable[[Any], None] | None = None
        bridge.answered.connect(self._on_answer)
        bridge.crashed.connect(self._on_crash)
        bridge.failed.connect(self._on_failed)

    @property
    def available(self) -> bool:
        """The session holds the module and waits for commands (paused, or between runs): Apply, Revert and
        Export act on its state, which every later run uses."""
        bridge = self.bridge
        return (
            bridge is not None
            and getattr(bridge, "module_path", None) is not None
            and str(getattr(bridge, "state", "")) in ("stopped", "idle")
        )

    @property
    def paused(self) -> bool:
        """Paused at a dispatch: Rerun and Benchmark have a dispatch to act on."""
        return paused_at_dispatch(self.workbench)

    def paused_dispatch(self):
        """The ``DispatchInfo`` of the dispatch the run is paused at, or None."""
        return self.workbench.state.paused if self.workbench is not None else None

    def ask(self, query: Query, then: Callable[[Any], None] | None = None) -> bool:
        if self.waiting is not None or not self.available:
            return False
        self.waiting, self._then = query, then
        self.bridge.evaluate(query)
        return True

    def _finish(self):
        then, self.waiting, self._then = self._then, None, None
        return then

    def _on_answer(self, answer: Answer) -> None:
        if self.waiting is None or answer.query != self.waiting:
            return  # another panel's query (history, registers...)
        then = self._finish()
        if isinstance(answer, SubstitutionRefused):
            self.failed.emit(answer.message or "failed", answer)
            return
        if then is not None:
            then(answer)
        self.done.emit(answer)

    def _on_failed(self, failed) -> None:
        if self.waiting is not None:
            self._finish()
            self.failed.emit(getattr(failed, "message", str(failed)), None)

    def _on_crash(self, _crash) -> None:
        if self.waiting is not None:
            self._finish()
            report = getattr(self.bridge, "crash_report", "") or "the debug session crashed"
            self.failed.emit(f"{report} The edit is kept; fix it and apply again.", None)
