"""What the stepper's status line says while a run goes: the last dispatch the session reported and how long
ago, refreshed every second, so a line that no report has changed for minutes (a long kernel, a host loop, a
remote server) says so instead of looking current. Where the run happens is named for a remote session."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QLabel

REFRESH_MS = 1000
STOPS = "Shift+F5 stops"


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class RunningStatus(QObject):
    """Writes ``label`` while a run goes (``running()``, ``reported(...)``, ``ended()``); ``where()`` names
    where the run happens ("" locally, "on SERVER" remotely)."""

    def __init__(self, label: QLabel, where: Callable[[], str] = lambda: "", parent: QObject | None = None):
        super().__init__(parent or label)
        self.label, self.where = label, where
        self.since: float | None = None  # when the run (or the resumed run) started
        self.last: tuple[str, float] | None = None  # the last dispatch reported, and when
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)

    def running(self) -> None:
        self.since, self.last = time.monotonic(), None
        self.timer.start()
        self.refresh()

    def reported(self, dispatch_text: str) -> None:
        self.last = (dispatch_text, time.monotonic())
        self.refresh()

    def ended(self) -> None:
        self.timer.stop()
        self.since = self.last = None

    def text(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        where = self.where()
        head = f"Running {where}…" if where else "Running…"
        parts = []
        if self.last is not None:
            what, at = self.last
            age = now - at
            parts.append(f"dispatch {what}" + (f" (reported {duration(age)} ago)" if age >= 2 else ""))
        if self.since is not None and now - self.since >= 2:
            parts.append(f"for {duration(now - self.since)}")
        return " ".join([head, *parts]) + f"  ({STOPS})"

    def refresh(self) -> None:
        if self.since is not None:
            self.label.setText(self.text())
