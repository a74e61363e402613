"""The executable editor's actions through the window's debug session (``SessionBridge``): when the run is
paused at a dispatch, Apply/Rerun/Revert/Export/Benchmark are the session's substitution queries
(``engine.substitute.session_queries``), answered by the session process. A faulting edited kernel takes
down only that process (the bridge restarts it and reports the crash); the edit stays in the editor and
in its draft file. Answers arrive as ``Answer`` events; this object matches them to the action waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Signal

from engine.substitute.errors import SourceDiagnostic


def paused_at_dispatch(bridge) -> bool:
    stop = getattr(bridge, "last_stop", None)
    return (
        bridge is not None
        and str(getattr(bridge, "state", "")) == "stopped"
        and stop is not None
        and stop.location.dispatch_info is not None
    )


def diagnostics_of(error: dict) -> list[SourceDiagnostic]:
    return [
        SourceDiagnostic(
            d.get("path") or "", d.get("line") or 0, d.get("column") or 0, d.get("severity", "error"), d["message"]
        )
        for d in error.get("diagnostics", ())
    ]


class SessionSubstitutions(QObject):
    """Substitution queries to the bridge, one at a time; ``done(query, value)`` or ``failed(text, error)``."""

    done = Signal(str, object)  # query, value (TensorRefs already read into numpy arrays)
    failed = Signal(str, object)  # text, the plain error dict (or None: a crash, a lost session)

    def __init__(self, bridge, parent: QObject | None = None):
        super().__init__(parent)
        self.bridge = bridge
        self.waiting: str | None = None
        self._then: Callable[[Any], None] | None = None
        bridge.answered.connect(self._on_answer)
        bridge.crashed.connect(self._on_crash)
        bridge.failed.connect(self._on_failed)

    @property
    def available(self) -> bool:
        return paused_at_dispatch(self.bridge)

    def ask(self, query: str, *args: Any, then: Callable[[Any], None] | None = None) -> bool:
        if self.waiting is not None or not self.available:
            return False
        self.waiting, self._then = query, then
        self.bridge.evaluate(query, *args)
        return True

    def _finish(self):
        then, self.waiting, self._then = self._then, None, None
        return then

    def _on_answer(self, answer) -> None:
        if answer.query != self.waiting:
            return  # another panel's query (history, registers...)
        value = answer.value
        then = self._finish()
        if isinstance(value, dict) and "error" in value:
            self.failed.emit(value["error"].get("message", "failed"), value["error"])
            return
        if isinstance(value, dict):
            value = {k: _read(v) for k, v in value.items()}
        if then is not None:
            then(value)
        self.done.emit(answer.query, value)

    def _on_failed(self, failed) -> None:
        if self.waiting is not None:
            self._finish()
            self.failed.emit(getattr(failed, "message", str(failed)), None)

    def _on_crash(self, _crash) -> None:
        if self.waiting is not None:
            self._finish()
            report = getattr(self.bridge, "crash_report", "") or "the debug session crashed"
            self.failed.emit(f"{report} The edit is kept; fix it and apply again.", None)


def _read(value: Any) -> Any:
    """TensorRefs (shared memory of the session process) read into arrays right away."""
    if isinstance(value, list):
        return [_read(v) for v in value]
    to_numpy = getattr(value, "to_numpy", None)
    if callable(to_numpy):
        return np.array(to_numpy(), copy=True)
    return value
