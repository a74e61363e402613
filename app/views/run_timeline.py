"""The run position timeline: the recorded span of the current call, where the run is, and its dispatches.

One painted strip (no child items): the axis covers instruction positions 0..latest (the furthest point the
call reached), the part before ``earliest`` (history dropped to bound memory) is hatched grey, each
dispatch is a tick at the position of the instruction that ran it, and the current position is a red
needle. Clicking or dragging moves a preview needle; releasing the mouse asks for that moment
(``positionRequested``), or for the dispatch when the press landed on a dispatch tick
(``dispatchRequested``). One request per gesture: scrubbing never floods the session.

The data is the session's ``History`` answer (``SessionBridge.historyChanged``).
"""

from __future__ import annotations

import bisect

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from engine.session.protocol import History

MARGIN = 8  # pixels left and right of the axis
NOT_LOCATED = (
    "The run went forward at full speed to this stop: its instruction positions are located when it goes "
    "back (Previous Dispatch, Shift+F6; Reverse Step, Ctrl+Shift+F11; or a click here, which travels to the start)"
)
NOT_LOCATED_SHORT = "ran at full speed: where it is in the run is found once you go back (Shift+F6)"
TICK_HIT = 4  # pixels either side of a dispatch tick that select it


class RunTimeline(QWidget):
    positionRequested = Signal(int)  # an instruction position in [earliest, latest]
    dispatchRequested = Signal(int)  # a dispatch's run ordinal

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runTimeline")
        self.setMinimumHeight(34)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.earliest = 0
        self.latest = 0
        self.position: int | None = None
        self.memory_bytes = 0
        self.dispatches: list[tuple[int, int, str]] = []  # (position, ordinal, name), by position
        self._dispatch_positions: list[int] = []
        self.preview: int | None = None  # where a drag is
        self._press_dispatch: int | None = None
        self._pressed = False

    def sizeHint(self) -> QSize:
        return QSize(600, 38)

    # -- data -------------------------------------------------------------------------------------------

    def set_history(self, history: History | None, dispatch_position: int | None = None) -> None:
        """Show ``history`` (None: nothing recorded). ``dispatch_position``: the run is inside the dispatch
        at that position (the history answers no position then)."""
        if history is None or not history.recording:
            self.latest = self.earliest = 0
            self.position = None
            self.dispatches = []
        else:
            self.earliest = history.earliest
            self.latest = history.latest
            position = history.position
            self.position = int(position) if position is not None else dispatch_position
            self.memory_bytes = history.memory_bytes
            self.dispatches = sorted((d.position, d.ordinal, d.name) for d in history.dispatches)
        self._dispatch_positions = [p for p, _, _ in self.dispatches]
        self.preview = None
        self.setToolTip(self.describe())
        self.update()

    @property
    def has_history(self) -> bool:
        return self.latest > 0 or bool(self.dispatches)

    @property
    def located(self) -> bool:
        """Whether the recorded span has a length: a run that went forward at full speed to a dispatch stop
        has its instructions' positions located only when it goes back (the axis would read "0 … 0")."""
        return self.latest > 0

    def describe(self) -> str:
        if not self.has_history:
            return "No recorded run: start one (Run to Entry) to travel in its history"
        if not self.located:
            return NOT_LOCATED
        where = "inside a dispatch" if self.position is None else f"instruction {self.position:,}"
        return (
            f"At {where} of {self.latest:,}; reachable back to {self.earliest:,}; "
            f"{len(self.dispatches)} dispatches; history {self.memory_bytes / (1 << 20):.1f} MiB. "
            "Click or drag to travel there; click a dispatch tick to stop in that dispatch."
        )

    # -- geometry -------------------------------------------------------------------------------------

    def _span(self) -> int:
        return max(1, self.latest)

    def x_of(self, position: int) -> float:
        width = max(1, self.width() - 2 * MARGIN)
        return MARGIN + width * position / self._span()

    def position_at(self, x: float) -> int:
        width = max(1, self.width() - 2 * MARGIN)
        p = round((x - MARGIN) / width * self._span())
        return max(self.earliest, min(self.latest, p))

    def dispatch_at(self, x: float) -> int | None:
        """The ordinal of the dispatch tick within ``TICK_HIT`` pixels of ``x`` (the nearest), or None."""
        if not self.dispatches:
            return None
        p = (x - MARGIN) / max(1, self.width() - 2 * MARGIN) * self._span()
        k = bisect.bisect_left(self._dispatch_positions, p)
        best = None
        for j in (k - 1, k):
            if 0 <= j < len(self.dispatches):
                dx = abs(self.x_of(self.dispatches[j][0]) - x)
                if dx <= TICK_HIT and (best is None or dx < best[0]):
                    best = (dx, j)
        if best is None or self.dispatches[best[1]][0] < self.earliest:
            return None
        return self.dispatches[best[1]][1]

    # -- painting -------------------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        h = self.height()
        top, bottom = 6, h - 12
        p.fillRect(self.rect(), QColor("#fafafa"))
        axis = QRectF(MARGIN, top, self.width() - 2 * MARGIN, bottom - top)
        p.fillRect(axis, QColor("#e3f2fd") if self.has_history else QColor("#eeeeee"))
        if self.has_history and self.earliest > 0:
            lost = QRectF(axis.left(), top, self.x_of(self.earliest) - axis.left(), bottom - top)
            p.fillRect(lost, QBrush(QColor("#bdbdbd"), Qt.BrushStyle.BDiagPattern))
        p.setPen(QPen(QColor("#90a4ae")))
        p.drawRect(axis)
        # Dispatch ticks: one line per distinct pixel column (a long run has thousands).
        p.setPen(QPen(QColor("#6a1b9a"), 1))
        last_x = None
        for position, _, _ in self.dispatches if self.located else ():
            x = int(self.x_of(position))
            if x != last_x:
                p.drawLine(x, top + 2, x, bottom - 2)
                last_x = x
        font = QFont(self.font())
        font.setPointSizeF(max(6.0, font.pointSizeF() * 0.8))
        p.setFont(font)
        p.setPen(QColor("#555555"))
        if self.has_history and not self.located:
            text = QFontMetrics(font).elidedText(NOT_LOCATED_SHORT, Qt.TextElideMode.ElideRight, int(axis.width()) - 4)
            p.drawText(axis, Qt.AlignmentFlag.AlignCenter, text)
        elif self.has_history:
            # The span's ends, unless the needle's own label is over them.
            needle = self.x_of(self.position) if self.position is not None else None
            if needle is None or needle > MARGIN + 70:
                p.drawText(QRectF(MARGIN, bottom, 200, 12), Qt.AlignmentFlag.AlignLeft, f"{self.earliest:,}")
            if needle is None or needle < self.width() - MARGIN - 70:
                p.drawText(
                    QRectF(self.width() - MARGIN - 200, bottom, 200, 12),
                    Qt.AlignmentFlag.AlignRight,
                    f"{self.latest:,}",
                )
        if self.preview is not None:
            x = self.x_of(self.preview)
            p.setPen(QPen(QColor("#1565c0"), 2, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x, top - 3), QPointF(x, bottom + 3))
            p.drawText(QRectF(x - 60, bottom, 120, 12), Qt.AlignmentFlag.AlignHCenter, f"{self.preview:,}")
        if self.position is not None and self.has_history:
            x = self.x_of(self.position)
            p.setPen(QPen(QColor("#c62828"), 2))
            p.drawLine(QPointF(x, top - 4), QPointF(x, bottom + 4))
            p.setBrush(QColor("#c62828"))
            p.drawPolygon([QPointF(x - 4, 0), QPointF(x + 4, 0), QPointF(x, top - 1)])
            if self.preview is None:
                left = min(max(0.0, x - 60), self.width() - 120.0)
                p.drawText(QRectF(left, bottom, 120, 12), Qt.AlignmentFlag.AlignHCenter, f"{self.position:,}")
        p.end()

    # -- mouse ----------------------------------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton or not self.has_history or not self.isEnabled():
            return super().mousePressEvent(event)
        x = event.position().x()
        self._pressed = True
        self._press_dispatch = self.dispatch_at(x)
        self.preview = self.position_at(x)
        self.update()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        x = event.position().x()
        if self._pressed:
            self._press_dispatch = None  # a drag scrubs positions
            self.preview = self.position_at(x)
            self.update()
        elif self.has_history:
            ordinal = self.dispatch_at(x)
            if ordinal is not None:
                name = next(n for _, o, n in self.dispatches if o == ordinal)
                self.setToolTip(f"dispatch #{ordinal} {name}: click to stop in it")
            else:
                self.setToolTip(f"instruction {self.position_at(x):,} — " + self.describe())

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if not self._pressed:
            return super().mouseReleaseEvent(event)
        self._pressed = False
        dispatch, position = self._press_dispatch, self.preview
        self._press_dispatch = None
        if dispatch is not None:
            self.dispatchRequested.emit(dispatch)
        elif position is not None and position != self.position:
            self.positionRequested.emit(position)
        else:
            self.preview = None
            self.update()
