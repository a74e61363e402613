"""The phase timeline: IREE's phases and the passes nested in them on a time axis (pyqtgraph).

One graphics item paints every rectangle from the columnar ``TimelineLayout``; a paint draws only the
rectangles overlapping the visible time range (a ``searchsorted`` window), in pixel space so labels
keep their size at any zoom. Hovering shows a pass's name and time; clicking a phase (or any pass in
it) emits ``phaseClicked`` with IREE's phase name.

The same timing is also a trace of the engine's one trace model (``engine.trace.compile_timing``):
"Open in Zones" shows it in the Zones document (statistics per pass, histogram, find) and "Compare
with…" sets it against another compilation of this session or a timing/trace file, the passes that got
slower first.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.views.phase_timing_layout import ROW_PHASE, TimelineLayout, layout_report, layout_timing
from engine.trace.compile_timing import trace_from_timing_report
from engine.trace.model import Trace

# Timings shown in this session, newest last (label, report): what "Compare with…" offers. Bounded.
_RECENT: list[tuple[str, object]] = []
_RECENT_MAX = 8

# One colour per phase, cycled; passes take a lighter shade of their phase's colour.
_PHASE_COLORS = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d4a6c8",
]  # fmt: skip
_ROW_HEIGHT = 0.9


def format_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


class PhaseTimelineItem(pg.GraphicsObject):
    """Paints a ``TimelineLayout``; x is seconds, y is the row (0 = phases)."""

    phaseClicked = Signal(str)
    passClicked = Signal(str, str)  # pass name, phase name

    def __init__(self, layout: TimelineLayout):
        super().__init__()
        self.layout = layout
        self.current_phase: str | None = None
        self.painted_count = 0  # rectangles drawn by the last paint (culling is tested on it)
        self.labelled_count = 0  # labels drawn by the last paint (only where a row is as tall as the text)
        self.setAcceptHoverEvents(True)
        self._phase_brushes = [QColor(c) for c in _PHASE_COLORS]
        self._pass_brushes = [QColor(c).lighter(135) for c in _PHASE_COLORS]

    def boundingRect(self) -> QRectF:  # noqa: N802
        return QRectF(0, 0, max(self.layout.span, 1e-9), self.layout.rows)

    def set_current_phase(self, name: str | None) -> None:
        self.current_phase = name
        self.update()

    def paint(self, p: QPainter, *args) -> None:
        lay = self.layout
        vb = self.getViewBox()
        if vb is None or not len(lay.start):
            return
        (x0, x1), _ = vb.viewRange()
        idx = lay.visible(x0, x1)
        tr = p.transform()
        sx, dx, sy, dy = tr.m11(), tr.dx(), tr.m22(), tr.dy()
        p.save()
        p.resetTransform()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        fm = QFontMetrics(p.font())
        px0 = dx + sx * lay.start[idx]
        px1 = dx + sx * (lay.start[idx] + lay.duration[idx])
        py0 = dy + sy * lay.row[idx]
        py1 = dy + sy * (lay.row[idx] + _ROW_HEIGHT)
        top, height = np.minimum(py0, py1), np.abs(py1 - py0)
        outline = QPen(QColor(255, 255, 255, 160))
        outline.setWidth(0)
        text_pen = QPen(QColor("#111111"))
        # sub-pixel rectangles of one row are merged into the pixel column they fall in
        last_px = {}
        count = labels = 0
        for j, i in enumerate(idx.tolist()):
            a, b = float(px0[j]), float(px1[j])
            row = int(lay.row[i])
            if b - a < 1.0:
                col = int(a)
                if last_px.get(row) == col:
                    continue
                last_px[row] = col
                b = a + 1.0
            color_i = int(lay.phase[i]) % len(_PHASE_COLORS)
            brush = self._phase_brushes[color_i] if row == ROW_PHASE else self._pass_brushes[color_i]
            if lay.scaled[i]:
                brush = QBrush(brush, Qt.BrushStyle.Dense3Pattern)
            rect = QRectF(a, float(top[j]), b - a, float(height[j]))
            p.setPen(outline)
            p.setBrush(brush)
            p.drawRect(rect)
            count += 1
            if row == ROW_PHASE and lay.names[i] == self.current_phase:
                p.setPen(QPen(QColor("black"), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(rect.adjusted(1, 1, -1, -1))
            # A label only where it fits its row: in a short plot (the compile panel at 1366x768) the rows are
            # thinner than a line of text and the labels of three rows were drawn over each other.
            if b - a > 30 and float(height[j]) >= 0.6 * fm.height():
                labels += 1
                text = fm.elidedText(self.label(i), Qt.TextElideMode.ElideRight, int(b - a) - 6)
                p.setPen(text_pen)
                p.drawText(
                    rect.adjusted(3, 0, -3, 0),
                    Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                    text,
                )
        p.restore()
        self.painted_count = count
        self.labelled_count = labels

    def label(self, i: int) -> str:
        """A rectangle's label: a pass's name; a phase's name and the time IREE measured in its passes (never
        the width it is drawn: that is scaled to the wall time where pipelines ran in parallel), marked Σ where
        it is their sum over threads and so wider than the rectangle."""
        lay = self.layout
        if int(lay.row[i]) != ROW_PHASE:
            return lay.names[i]
        return f"{lay.names[i]}  {'Σ ' if lay.scaled[i] else ''}{format_seconds(lay.measured[i])}"

    # -- interaction -------------------------------------------------------------------------------------
    def index_at(self, pos: QPointF) -> int | None:
        row = int(np.floor(pos.y()))
        if pos.y() - row > _ROW_HEIGHT or row < 0:
            return None
        return self.layout.hit(pos.x(), row)

    def describe(self, i: int) -> str:
        lay = self.layout
        phase = lay.phase_names[int(lay.phase[i])] if lay.phase_names else ""
        if int(lay.row[i]) == ROW_PHASE:
            text = f"phase {lay.names[i]}: its passes took {format_seconds(lay.measured[i])} (IREE's timing)"
            if lay.scaled[i]:
                text = text.replace("took", "took Σ", 1)
                text += (
                    f"\ndrawn {format_seconds(lay.duration[i])} wide: the passes add up to more than the compile's "
                    f"{format_seconds(lay.total_wall_s)} wall time (pipelines ran on several threads, their times "
                    "summed), so every phase is drawn scaled to fit it; IREE reports no phase's own wall time"
                )
            return text
        text = f"{lay.names[i]}: {format_seconds(lay.measured[i])} (phase {phase})"
        if lay.scaled[i]:
            text += "\nran in parallel with its siblings; drawn scaled to fit its parent"
        return text

    def hoverEvent(self, ev) -> None:  # noqa: N802
        if ev.isExit():
            QToolTip.hideText()
            return
        i = self.index_at(ev.pos())
        if i is None:
            self.setToolTip("")
            return
        self.setToolTip(self.describe(i))

    def mouseClickEvent(self, ev) -> None:  # noqa: N802
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        i = self.index_at(ev.pos())
        if i is None:
            return
        ev.accept()
        lay = self.layout
        phase = lay.phase_names[int(lay.phase[i])]
        if int(lay.row[i]) != ROW_PHASE:
            self.passClicked.emit(lay.names[i], phase)
        self.phaseClicked.emit(phase)


class PhaseTimeline(QWidget):
    """A timeline of one compilation's phases and passes, with a one-line summary above it."""

    phaseClicked = Signal(str)
    passClicked = Signal(str, str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.summary = QLabel("no timing", self)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the window
        self.summary.setWordWrap(True)  # ... and is read whole in a narrow document (it was cut at 1366 px)
        self.plot = pg.PlotWidget(self, background="w")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.getPlotItem().hideAxis("left")
        # IREE's timing has durations, not start times: the passes are laid end to end in report order.
        self.plot.setLabel("bottom", "passes end to end (IREE reports durations, not start times)", units="s")
        vb = self.plot.getViewBox()
        vb.invertY(True)
        vb.setMouseEnabled(x=True, y=False)
        vb.setLimits(xMin=0)
        self.item: PhaseTimelineItem | None = None
        self.report = None  # the TimingReport shown, when set_timing gave one
        self.label = "compilation"
        self.zones_button = QToolButton(self)
        self.zones_button.setText("Open in Zones")
        self.zones_button.clicked.connect(self.open_in_zones)
        self.compare_button = QToolButton(self)
        self.compare_button.setText("Compare with…")
        self.compare_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.compare_menu = QMenu(self.compare_button)
        self.compare_menu.aboutToShow.connect(self._fill_compare_menu)
        self.compare_button.setMenu(self.compare_menu)
        for b in (self.zones_button, self.compare_button):
            b.setEnabled(False)
        self.compare_view = None  # the last A/B window opened
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.zones_button)
        top.addWidget(self.compare_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(top)
        lay.addWidget(self.plot, 1)
        self.setMinimumHeight(120)

    def set_layout(self, layout: TimelineLayout) -> None:
        if self.item is not None:
            self.plot.removeItem(self.item)
        self.item = PhaseTimelineItem(layout)
        self.item.phaseClicked.connect(self.phaseClicked)
        self.item.passClicked.connect(self.passClicked)
        self.plot.addItem(self.item)
        span = max(layout.span, 1e-6)
        vb = self.plot.getViewBox()
        vb.setLimits(xMin=0, xMax=span * 1.02, yMin=-0.1, yMax=layout.rows + 0.1)
        vb.setRange(xRange=(0, span), yRange=(0, layout.rows), padding=0.01)
        # The same count as a compilation's header: IREE's phases; the serialization after the last dump
        # ("output") is drawn but is not one of them.
        phases = [p for p in layout.phase_names if p != "output"]
        extra = " (+ output)" if len(phases) < len(layout.phase_names) else ""
        text = f"{len(phases)} phases{extra}, {len(layout.names) - len(layout.phase_names)} passes"
        if layout.total_wall_s:
            text += f"; total {format_seconds(layout.total_wall_s)} wall (the axis)"
            measured = float(layout.measured[layout.row == 0].sum()) if len(layout.start) else 0.0
            if measured > layout.total_wall_s * 1.05:
                text += f"; passes add up to {format_seconds(measured)}: pipelines ran in parallel"
        self.summary.setText(text)
        self.summary.setToolTip(text)

    def set_timing(self, report, phase_names, label: str | None = None) -> None:
        """Show an ``engine.compiler.TimingReport``; ``phase_names`` are the phases whose dumps it contains."""
        self.set_layout(layout_report(report, phase_names))
        if self.report is not report:
            # One compilation shown twice (the compile panel and its Phases document) keeps one name: the
            # session's first compile was "compilation 2" in the document.
            known = next((name for name, r in _RECENT if r is report), None)
            self.label = label or known or f"compilation {len(_RECENT) + 1} ({format_seconds(report.total_wall_s)})"
            if known is None:
                _RECENT.append((self.label, report))
                del _RECENT[:-_RECENT_MAX]
        self.report = report
        for b in (self.zones_button, self.compare_button):
            b.setEnabled(True)

    # -- the timing as a trace (Zones)

    def timing_trace(self) -> Trace | None:
        """The shown timing as zones of the engine's trace model (None without a report)."""
        if self.report is None:
            return None
        return trace_from_timing_report(self.report, self.label)

    def open_in_zones(self) -> Trace | None:
        """Show the timing in the window's Zones document (found by duck typing: ``show_panel``)."""
        trace = self.timing_trace()
        if trace is None:
            return None
        window = self.window()
        show_panel = getattr(window, "show_panel", None)
        if show_panel is not None:
            view = show_panel("zones")
            if view is not None and hasattr(view, "set_trace"):
                view.set_trace(trace)
        return trace

    def _fill_compare_menu(self) -> None:
        self.compare_menu.clear()
        for label, report in reversed(_RECENT):
            if report is self.report:
                continue
            act = self.compare_menu.addAction(label)
            act.triggered.connect(lambda _=False, r=report, n=label: self.compare_with(r, n))
        self.compare_menu.addSeparator()
        self.compare_menu.addAction("Timing or trace file…").triggered.connect(self._compare_file)

    def _compare_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Compare with", "", "Timing or trace (*.json *.ireeprof)")
        if not path:
            return
        from engine.errors import LensError
        from engine.trace.open import load_trace

        try:
            other = load_trace(path)
        except (LensError, OSError) as e:
            self.summary.setText(f"cannot compare with {path}: {e}")
            return
        self.compare_with(other)

    def compare_with(self, other, label: str | None = None):
        """Open an A/B window: this timing (A) against ``other`` (B: a TimingReport or a Trace), passes
        that got slower in B first. Returns the ``ZonesCompareView``."""
        from app.views.zones_view import ZonesCompareView

        a = self.timing_trace()
        if a is None:
            return None
        b = other if isinstance(other, Trace) else trace_from_timing_report(other, label or "other")
        dialog = QDialog(self)
        dialog.setWindowTitle(f"{self.label} vs {b.source or 'other'}")
        view = ZonesCompareView(dialog)
        QVBoxLayout(dialog).addWidget(view)
        view.set_traces(a, b)
        dialog.resize(1100, 700)
        dialog.show()
        self.compare_view = view
        return view

    def set_passes(self, passes, phase_names) -> None:
        self.set_layout(layout_timing(passes, phase_names))

    def clear(self) -> None:
        if self.item is not None:
            self.plot.removeItem(self.item)
            self.item = None
        self.summary.setText("no timing")
        self.report = None
        for b in (self.zones_button, self.compare_button):
            b.setEnabled(False)

    def set_current_phase(self, name: str | None) -> None:
        if self.item is not None:
            self.item.set_current_phase(name)

    def timeline_layout(self) -> TimelineLayout | None:
        return self.item.layout if self.item is not None else None

    def phase_scene_pos(self, name: str):
        """Where phase ``name``'s rectangle is, in the plot widget's viewport coordinates (a QPoint)."""
        lay = self.item.layout
        # The view applies a new range lazily (on its next paint): apply it now, so the position is current.
        self.plot.getViewBox().updateMatrix()
        i = lay.phase_rect(name)
        center = QPointF(lay.start[i] + lay.duration[i] / 2, _ROW_HEIGHT / 2)
        scene = self.item.mapToScene(center)
        return self.plot.mapFromScene(scene)
