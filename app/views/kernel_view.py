"""One recorded workgroup, stepped like a debugger (issue 31): the kernel's source with the current statement's
line highlighted and, beside each line executed so far, the values its last statement made; F11/F10 step a
statement/a line, Shift+F11/Shift+F10 step back (the record is whole: going back shows the same values); Run
to NaN; a timeline of the workgroup's statements (source line against step, NaN/Inf in red) that moves the
position when clicked.

The view only shows an ``engine.kernel.trace.KernelTrace`` through an ``engine.kernel.cursor.KernelCursor``;
recording is the engine's (``engine.kernel.stepper``), run on the window's engine worker.
"""

from __future__ import annotations

import bisect

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.action_strip import ActionStrip
from engine.kernel.cursor import KernelCursor
from engine.kernel.trace import KernelStep, KernelTrace

CURRENT_LINE = QColor(255, 236, 150)
NONFINITE = QColor(255, 190, 190)
MAX_VALUES_SHOWN = 8
MAX_TIMELINE_POINTS = 20_000

# The debugger's keys: the window's stepper owns them too, so the view takes them while it has focus.
KEYS = {
    (Qt.Key.Key_F11, False): "step",
    (Qt.Key.Key_F10, False): "step_over",
    (Qt.Key.Key_F11, True): "step_back",
    (Qt.Key.Key_F10, True): "step_back_over",
}


def values_text(step: KernelStep) -> str:
    shown = ", ".join(_number(v) for v in step.values[:MAX_VALUES_SHOWN])
    more = f", … ({len(step.values)} lanes)" if len(step.values) > MAX_VALUES_SHOWN else ""
    # The recorded value's own type (<16 x i16>: a bf16 product's bits, not a number of that size).
    typed = f" : {step.value_type}" if step.value_type else ""
    text = f"{step.op}: [{shown}{more}]{typed}"
    if step.store is not None:
        text += f" → binding {step.store.binding} @{step.store.offset}"
    return text


def _number(v) -> str:
    return str(v) if isinstance(v, int) else f"{v:.6g}"


class _StepKeys(QObject):
    """Takes F10/F11 (and with Shift) from the widgets of the view before the window's shortcuts do."""

    def __init__(self, view: KernelView):
        super().__init__(view)
        self.view = view

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress):
            shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
            name = KEYS.get((Qt.Key(event.key()), shift))
            if name is not None:
                event.accept()
                if kind == QEvent.Type.KeyPress:
                    getattr(self.view, name)()
                return True
        return False


class KernelView(QWidget):
    """A recorded workgroup: source with values, stepping actions, a statement timeline."""

    positionChanged = Signal(int)  # the current statement's index

    def __init__(self, trace: KernelTrace, parent: QWidget | None = None):
        super().__init__(parent)
        self.trace = trace
        self.cursor = KernelCursor(trace)
        self._lines = {key: steps for key, steps in trace.lines_executed().items()}
        self._file: str | None = None
        self._rows: dict[int, int] = {}

        self.header = QLabel(self)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.statement = QLabel(self)
        self.statement.setObjectName("kernelStatement")
        self.statement.setWordWrap(True)
        self.statement.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.actions_strip = ActionStrip(self)
        self.step_back_over_action = self._action("◀◀ Line", "Shift+F10", "Back to the previous source line", self.step_back_over)
        self.step_back_action = self._action("◀ Statement", "Shift+F11", "Back one statement", self.step_back)
        self.step_action = self._action("Statement ▶", "F11", "Next statement", self.step)
        self.step_over_action = self._action("Line ▶▶", "F10", "Next source line", self.step_over)
        self.run_to_nan_action = self._action("Run to NaN", "", "The next statement with a NaN or Inf value", self.run_to_nan)
        self.first_nan_action = self._action(
            "First NaN/Inf", "", "The workgroup's first statement with a NaN or Inf value: where it was made",
            self.first_nan,
        )  # fmt: skip

        self.source = QTableWidget(0, 3, self)
        self.source.setObjectName("kernelSource")
        self.source.setHorizontalHeaderLabels(["Line", "Source", "Values (last executed)"])
        self.source.verticalHeader().setVisible(False)
        self.source.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.source.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.source.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.source.setWordWrap(False)
        header = self.source.horizontalHeader()
        # Line numbers fit, the values keep a fixed share (set on resize) and the source takes the rest, its
        # long lines elided: the values beside a line must stay in view whatever the width.
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        self.source.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.source.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.source.cellDoubleClicked.connect(self._run_to_row)

        self.timeline = pg.PlotWidget(self)
        self.timeline.setObjectName("kernelTimeline")
        self.timeline.setLabel("bottom", "statement")
        self.timeline.setLabel("left", "line")  # "source line" was cut in its 100-px plot
        self.timeline.setMouseEnabled(x=True, y=False)
        self._plot_timeline()
        self.marker = pg.InfiniteLine(0, angle=90, pen=pg.mkPen("y", width=2))
        self.timeline.addItem(self.marker)
        self.timeline.scene().sigMouseClicked.connect(self._timeline_clicked)
        self.timeline.setMinimumHeight(90)

        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.source)
        split.addWidget(self.timeline)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.actions_strip)
        layout.addWidget(self.statement)
        layout.addWidget(split, 1)

        self._keys = _StepKeys(self)
        for widget in (self, self.source, self.source.viewport(), self.timeline, self.timeline.viewport()):
            widget.installEventFilter(self._keys)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

        wg = ",".join(map(str, trace.workgroup))
        count = "x".join(map(str, trace.workgroup_count))
        notes = "".join(f" Note: {n}." for n in trace.notes)
        self.header.setText(
            f"Dispatch #{trace.dispatch} {trace.export}, workgroup ({wg}) of {count} — {trace.backend}, "
            f"{len(trace.steps)} statements recorded, {len(trace.stores())} stores.{notes}"
        )
        self.show_position()

    def _action(self, text: str, key: str, tip: str, slot) -> QAction:
        action = QAction(text, self)
        if key:
            action.setToolTip(f"{tip} ({key})")
            action.setShortcut(QKeySequence(key))
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        else:
            action.setToolTip(tip)
        action.triggered.connect(slot)
        self.actions_strip.addAction(action)
        return action

    # -- moving

    def step(self) -> None:
        self.cursor.step()
        self.show_position()

    def step_back(self) -> None:
        self.cursor.step_back()
        self.show_position()

    def step_over(self) -> None:
        self.cursor.step_over()
        self.show_position()

    def step_back_over(self) -> None:
        self.cursor.step_back_over()
        self.show_position()

    def run_to_nan(self) -> bool:
        found = self.cursor.run_to_nan()
        if found is None:
            self.statement.setText(self.statement.text() + "  — no NaN or Inf after this statement")
            return False
        self.show_position()
        return True

    def first_nan(self) -> bool:
        index = self.trace.first_nonfinite()
        if index is None:
            self.statement.setText(self.statement.text() + "  — the workgroup made no NaN or Inf")
            return False
        self.go(index)
        return True

    def go(self, index: int) -> None:
        self.cursor.go(index)
        self.show_position()

    def follow_store(self, binding: int, offset: int) -> bool:
        """Move to the store that wrote byte ``offset`` of ``binding`` (the element clicked in the inspector)."""
        found = self.cursor.store_that_wrote(binding, offset)
        self.show_position()
        return found is not None

    def _run_to_row(self, row: int, _column: int) -> None:
        item = self.source.item(row, 0)
        if item is not None and self._file is not None:
            if self.cursor.run_to_line(int(item.text()), self._file) is not None:
                self.show_position()

    def _timeline_clicked(self, event) -> None:
        point = self.timeline.getPlotItem().vb.mapSceneToView(event.scenePos())
        if self.trace.steps:
            self.go(int(round(point.x())))

    # -- drawing

    def _plot_timeline(self) -> None:
        steps = self.trace.steps
        if not steps:
            return
        stride = max(1, len(steps) // MAX_TIMELINE_POINTS)
        shown = steps[::stride]
        x = np.array([s.index for s in shown], dtype=np.float64)
        y = np.array([s.location.line if s.location is not None else 0 for s in shown], dtype=np.float64)
        self.timeline.plot(x, y, pen=None, symbol="o", symbolSize=3, symbolBrush=(120, 160, 255))
        bad = [s for s in steps if s.nonfinite][:MAX_TIMELINE_POINTS]
        if bad:
            self.timeline.plot([s.index for s in bad], [s.location.line if s.location else 0 for s in bad],
                               pen=None, symbol="o", symbolSize=6, symbolBrush=(230, 40, 40))  # fmt: skip

    def _load_file(self, file: str | None) -> None:
        if file == self._file and self.source.rowCount():
            return
        self._file = file
        path = self.trace.source_files.get(file or "")
        lines: list[str] = []
        if path is not None:
            try:
                with open(path, errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                lines = []
        executed = sorted(line for (f, line) in self._lines if f == file)
        if not lines:
            # The source is not readable here: its executed lines, with what the record says of them.
            rows = executed
            texts = {line: "(source not available)" for line in rows}
        else:
            rows = list(range(1, len(lines) + 1))
            texts = {n: lines[n - 1] for n in rows}
        self.source.setRowCount(len(rows))
        self._rows = {}
        for r, n in enumerate(rows):
            self._rows[n] = r
            self.source.setItem(r, 0, QTableWidgetItem(str(n)))
            self.source.setItem(r, 1, QTableWidgetItem(texts[n]))
            self.source.setItem(r, 2, QTableWidgetItem(""))
        self._fit_values()

    VALUES_SHARE = 0.45  # of the source table's width

    def _fit_values(self) -> None:
        self.source.setColumnWidth(2, max(160, int(self.source.viewport().width() * self.VALUES_SHARE)))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit_values()

    def show_position(self) -> None:
        step = self.cursor.current
        if step is None:
            self.statement.setText("The workgroup executed no statement.")
            return
        file = step.location.file if step.location is not None else self._file
        if file is None:  # no location at all yet: show the first file the record names
            file = next((s.location.file for s in self.trace.steps if s.location is not None), None)
        self._load_file(file)
        position = self.cursor.position
        for (f, line), indices in self._lines.items():
            row = self._rows.get(line) if f == self._file else None
            if row is None:
                continue
            k = bisect.bisect_right(indices, position) - 1
            item = self.source.item(row, 2)
            last = self.trace.steps[indices[k]] if k >= 0 else None
            item.setText(values_text(last) if last is not None else "")
            bad = last is not None and last.nonfinite
            for column in range(3):
                cell = self.source.item(row, column)
                cell.setBackground(QBrush(NONFINITE) if bad else QBrush())
        row = self._rows.get(step.location.line) if step.location is not None and file == self._file else None
        if row is not None:
            for column in range(3):
                self.source.item(row, column).setBackground(QBrush(CURRENT_LINE))
            self.source.setCurrentCell(row, 1)
            self.source.scrollToItem(self.source.item(row, 1), QAbstractItemView.ScrollHint.PositionAtCenter)
        self.marker.setValue(position)
        # LLVM gives some statements (a phi, a value the optimizer merged) no location: say so, not "at unknown".
        where = f"at {step.loc}" if step.location is not None else f"({step.op}, which carries no source location)"
        self.statement.setText(
            f"Statement {position + 1} of {len(self.trace.steps)} {where}: {values_text(step)}"
            + ("  — NaN/Inf" if step.nonfinite else "")
            + f"\n{step.instruction}"
        )
        self.positionChanged.emit(position)

    @property
    def current_row(self) -> int | None:
        """The source table's row of the current statement's line (None when it has no location)."""
        step = self.cursor.current
        if step is None or step.location is None:
            return None
        return self._rows.get(step.location.line)
