"""The zones view: a trace's timeline, its statistics per zone name with a duration histogram, find, and
open/drop of trace files; ``ZonesCompareView`` puts two traces side by side with the A/B table.

Traces load on the engine worker (``load_trace_job``) with a progress bar; a bad file shows its error in
the view and the current trace stays. Selecting a dispatch zone moves the shared context to that dispatch
(its ordinal in the run, or its export name when the trace has no ordinal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.elided_label import ElidedLabel
from app.views.zones_by_source import BySourceTable, RowsModel, sortable_table
from app.views.zones_timeline import ZoneTimeline, format_ns
from engine.trace.by_source import Attribution, SourceTime
from engine.trace.model import Trace, ZoneInfo
from engine.trace.query import ZoneIndex
from engine.trace.stats import ZoneDiff, ZoneStats, compare, durations_of, histogram, zone_statistics

TRACE_FILTER = "Traces (*.json *.ireeprof *.jsonl *.lenstrace *.txt);;All files (*)"
LOAD_TAG = "zones-load"


HISTOGRAM_HINT = "Durations: select a name in the table"


@dataclass(frozen=True)
class LoadedTrace:
    """What a load job hands the GUI: the trace, its index and its statistics, all built off the GUI thread."""

    trace: Trace
    index: ZoneIndex
    stats: list[ZoneStats]
    by_source: Attribution | None = None  # time by source line, where the module's program is known
    by_source_note: str | None = None  # why there is none


def load_trace_job(path: str, task: Any = None) -> LoadedTrace:
    """Read a trace file and prepare what the view shows (runs on the engine worker)."""
    from engine.trace.open import load_trace

    if task is not None:
        task.progress(0.05, f"reading {Path(path).name}")

    def progress(fraction: float, message: str) -> None:
        if task is not None:
            task.check()  # a newer open cancels this one
            task.progress(0.05 + 0.6 * fraction, message)

    trace = load_trace(path, progress)
    if task is not None:
        task.check()
        task.progress(0.7, f"{len(trace.zones):,} zones; statistics")
    stats = zone_statistics(trace)
    if task is not None:
        task.progress(0.95, "index")
    return LoadedTrace(trace, ZoneIndex(trace), stats)


class StatsModel(RowsModel):
    """Rows of ``ZoneStats``; ``Qt.UserRole`` holds numbers for sorting."""

    COLUMNS = ("name", "count", "total", "self", "mean", "min", "p50", "p90", "p99", "max")
    FIELDS = (
        "name",
        "count",
        "total_ns",
        "self_ns",
        "mean_ns",
        "min_ns",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "max_ns",
    )

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        r = self.rows[index.row()]
        value = getattr(r, self.FIELDS[index.column()])
        if role == Qt.ItemDataRole.UserRole:
            return value
        if role == Qt.ItemDataRole.DisplayRole:
            if index.column() == 0:
                return value
            if index.column() == 1:
                return f"{value:,}"
            return format_ns(value)
        if role == Qt.ItemDataRole.ToolTipRole and index.column() == 0:
            return value  # the whole name (the cell may elide its middle)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class DiffModel(RowsModel):
    """Rows of ``ZoneDiff`` (A/B), slower-in-B first; the difference column is red when B is slower."""

    COLUMNS = ("name", "count A", "count B", "total A", "total B", "Δ total", "mean A", "mean B", "Δ mean")

    def _values(self, d: ZoneDiff) -> tuple:
        return (
            d.name, d.count_a, d.count_b, d.total_a_ns, d.total_b_ns, d.total_diff_ns,
            d.mean_a_ns, d.mean_b_ns, d.mean_diff_ns,
        )  # fmt: skip

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        d = self.rows[index.row()]
        value = self._values(d)[index.column()]
        col = index.column()
        if role == Qt.ItemDataRole.UserRole:
            return value
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return value
            if col in (1, 2):
                return f"{value:,}"
            text = format_ns(value)
            return ("+" + text) if col in (5, 8) and value > 0 else text
        if role == Qt.ItemDataRole.ForegroundRole and col in (5, 8):
            return QColor("#c0392b") if value > 0 else QColor("#1e8449") if value < 0 else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


NAME_COLUMN_WIDTH = 240
NAME_SHARE = 0.4  # of a narrow statistics table's width
MIN_NAME_WIDTH = 120
COUNT_PADDING = 16  # pixels beside a count column's widest text (cell margins, the sort arrow)


class _NameShare(QObject):
    """Keeps the name column at ``NAME_SHARE`` of a narrow table's width (at least ``MIN_NAME_WIDTH``, at most
    ``NAME_COLUMN_WIDTH``) as the table is resized: at 1366x768 the pane is ~370 px, and a fixed 240-px name
    left room for the count alone, every time column behind the scroll bar. Names are elided in the middle."""

    def __init__(self, view: QTableView):
        super().__init__(view)
        self.view = view
        view.viewport().installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize:
            width = int(self.view.viewport().width() * NAME_SHARE)
            self.view.horizontalHeader().resizeSection(0, max(MIN_NAME_WIDTH, min(NAME_COLUMN_WIDTH, width)))
        return False


def stats_table(model: QAbstractTableModel) -> tuple[QTableView, QSortFilterProxyModel]:
    # The name column keeps a readable width (stretched in a narrow 1366-px document it was ~40 px: "e...e"),
    # a share of a narrow table (_NameShare); the numbers ("296.117 ms" whole) scroll sideways past that, and
    # the last column takes what room is left.
    view, proxy = sortable_table(model, (NAME_COLUMN_WIDTH,), 88)
    proxy.setFilterKeyColumn(0)
    proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    view.horizontalHeader().setMinimumSectionSize(40)
    # Counts are short ("192"): their columns as wide as the header ("count A") and seven digits, not the 88 px
    # of a time, so at 1366x768 "self" is in sight beside "total" instead of behind the scroll bar.
    header = view.horizontalHeader()
    digits = view.fontMetrics().horizontalAdvance("9,999,999")
    for column in range(model.columnCount()):
        title = str(model.headerData(column, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole) or "")
        if title.startswith("count"):
            header.resizeSection(column, max(digits, header.fontMetrics().horizontalAdvance(title)) + COUNT_PADDING)
    _NameShare(view)
    return view, proxy


class ZonesView(QWidget):
    """Timeline + statistics + histogram of one trace."""

    zoneSelected = Signal(object)  # ZoneInfo
    traceLoaded = Signal(object)  # Trace
    loadFailed = Signal(str)

    def __init__(self, context=None, worker=None, parent: QWidget | None = None, open_document=None):
        super().__init__(parent)
        self.context = context
        self.open_document = open_document  # the window's (PanelServices.open_document); None: standalone
        self._own_worker = worker is None
        self._worker = worker
        self.trace: Trace | None = None
        self.stats: list[ZoneStats] = []
        self._find_from = -1
        self.setAcceptDrops(True)

        self.open_button = QPushButton("Open…")
        self.open_button.clicked.connect(self._open_dialog)
        self.find_edit = QLineEdit()
        self.find_edit.setPlaceholderText("find zone (Enter: next)")
        self.find_edit.textChanged.connect(self._filter)
        self.find_edit.returnPressed.connect(lambda: self.find(self.find_edit.text()))
        zoom_all = QPushButton("Zoom all")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(160)
        self.progress.setVisible(False)
        self.summary = ElidedLabel("no trace: open or drop a Chrome trace, .ireeprof or compile timing JSON")
        self.error = QLabel()
        self.error.setStyleSheet("color: #b03030")
        self.error.setWordWrap(True)
        self.error.setVisible(False)

        self.timeline = ZoneTimeline()
        zoom_all.clicked.connect(self.timeline.zoom_all)
        self.timeline.zoneSelected.connect(self._on_zone)
        self.stats_model = StatsModel(self)
        self.table, self.proxy = stats_table(self.stats_model)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        self.histogram = pg.PlotWidget(background="w")
        self.histogram.setMenuEnabled(False)
        self.histogram.hideButtons()
        self.histogram.setLabel("bottom", "duration", units="s")
        self.histogram.setLabel("left", "zones")
        self.histogram.setMinimumWidth(220)
        # The selected name above the plot, elided to its width: as the plot's own title (a LabelItem as wide
        # as its text) a long dispatch name widened the plot past its splitter and cut title and axis alike.
        # A name keeps its start and end (elided in the middle); the hint reads from its start ("Durations:
        # selec…ame in the table" at 1366x768).
        self.histogram_title = ElidedLabel(HISTOGRAM_HINT, mode=Qt.TextElideMode.ElideRight)
        self.histogram_title.setObjectName("zonesHistogramTitle")
        self.histogram_title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.histogram_title.setStyleSheet("background: white; color: #404040")
        self._bars: pg.BarGraphItem | None = None

        bar = QHBoxLayout()
        for w in (self.open_button, zoom_all, self.find_edit, self.progress):
            bar.addWidget(w)
        self.by_source = BySourceTable()
        self.by_source.lineSelected.connect(self.select_source_line)
        self.by_source.table.activated.connect(
            lambda index: self.open_source_line(self.by_source.row_at(index.row()))
        )
        self.tables = QTabWidget()
        self.tables.addTab(self.table, "Statistics")
        self.tables.addTab(self.by_source, "By source")
        lower = QSplitter(Qt.Orientation.Horizontal)
        lower.addWidget(self.tables)
        histogram_pane = QWidget()
        pane = QVBoxLayout(histogram_pane)
        pane.setContentsMargins(0, 0, 0, 0)
        pane.setSpacing(0)
        pane.addWidget(self.histogram_title)
        pane.addWidget(self.histogram, 1)
        lower.addWidget(histogram_pane)
        lower.setStretchFactor(0, 3)
        lower.setStretchFactor(1, 1)
        lower.setSizes([700, 300])
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.timeline)
        split.addWidget(lower)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.summary)
        lay.addWidget(self.error)
        lay.addWidget(split, 1)

    # -- data

    def set_trace(
        self,
        trace: Trace,
        index: ZoneIndex | None = None,
        stats: list[ZoneStats] | None = None,
        by_source: Attribution | None = None,
        by_source_note: str | None = None,
    ) -> None:
        self.trace = trace
        self.by_source.set_attribution(by_source, by_source_note)
        self.stats = stats if stats is not None else zone_statistics(trace)
        self.stats_model.set_rows(self.stats)
        self.table.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        self.timeline.set_trace(trace, index)
        a, b = trace.span
        tracks = f"{len(trace.tracks)} track{'s' if len(trace.tracks) != 1 else ''}"
        span = format_ns(b - a)
        wall = trace.metadata.get("total_wall_s") if trace.metadata.get("kind") == "compile-timing" else None
        if wall is not None:  # MLIR's timing has durations, no start times: the axis is a layout, not a clock
            span = (f"laid out end to end over {span} (MLIR reports no start times; parallel pipelines add up), "
                    f"{format_ns(int(wall * 1e9))} wall")  # fmt: skip
        self.summary.setText(
            f"{Path(trace.source).name or 'trace'}: {len(trace.zones):,} zones on {tracks}, {len(self.stats)} names, "
            + span
        )
        self.error.setVisible(False)
        self._find_from = -1
        if self._bars is not None:  # the last trace's zone is not this one's
            self.histogram.removeItem(self._bars)
            self._bars = None
        self.histogram_title.mode = Qt.TextElideMode.ElideRight
        self.histogram_title.setText(HISTOGRAM_HINT)
        self.traceLoaded.emit(trace)

    def open_path(self, path: str | Path) -> int:
        """Load ``path`` on the engine worker (a newer open replaces a waiting one)."""
        worker = self._ensure_worker()
        self.progress.setValue(0)
        self.progress.setVisible(True)
        return worker.submit(
            load_trace_job, str(path), tag=LOAD_TAG, on_result=self._loaded, on_error=self._failed
        )

    def _ensure_worker(self):
        if self._worker is None:
            from app.workers import EngineWorker

            self._worker = EngineWorker(self, name="lens-zones-loader")
        if not getattr(self, "_progress_connected", False):
            self._worker.progressed.connect(self._on_progress)
            self._progress_connected = True
        return self._worker

    def _on_progress(self, p) -> None:
        if p.tag == LOAD_TAG:
            self.progress.setValue(int(p.fraction * 100))
            self.progress.setFormat(p.text or "%p%")

    def _loaded(self, loaded: LoadedTrace) -> None:
        self.progress.setVisible(False)
        self.set_trace(loaded.trace, loaded.index, loaded.stats, loaded.by_source, loaded.by_source_note)

    def _failed(self, err) -> None:
        self.progress.setVisible(False)
        self.error.setText(f"Cannot open the trace: {err.message}")
        self.error.setVisible(True)
        self.loadFailed.emit(err.message)

    def closeEvent(self, ev) -> None:  # noqa: N802
        self.shutdown()
        super().closeEvent(ev)

    def shutdown(self) -> None:
        if self._own_worker and self._worker is not None:
            self._worker.shutdown()
            self._worker = None

    # -- selection, find, histogram

    def _on_zone(self, info: ZoneInfo) -> None:
        self.select_name(info.name)
        if self.context is not None and info.category == "dispatch":
            self.context.set_dispatch(info.name)
        self.zoneSelected.emit(info)

    def select_name(self, name: str) -> None:
        for r in range(self.proxy.rowCount()):
            if self.proxy.index(r, 0).data() == name:
                self.table.selectRow(r)
                return

    def _on_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid() or self.trace is None:
            return
        name = self.proxy.index(current.row(), 0).data()
        self.show_histogram(name)
        item = self.timeline.item
        if item is not None:
            item.highlight_name = self.trace.names.id_of(name)
            item.update()

    def select_source_line(self, row: SourceTime) -> None:
        """Mark the line's dispatches in the timeline and move the shared context to the first of them in
        the run (by IREE's name: the Dispatches panel and the compile panel follow the context)."""
        if self.trace is None:
            return
        ids = tuple(i for i in (self.trace.names.id_of(name) for name in row.dispatches) if i is not None)
        item = self.timeline.item
        if item is not None:
            item.highlight_name = None
            item.highlight_names = ids
            item.update()
        if self.context is not None and ids:
            order = self.trace.zones_in_time_order("dispatch")
            first = order[np.isin(self.trace.zones.name[order], ids)]
            if first.shape[0]:
                # The context names a dispatch by IREE's name (the compile-side views follow it); a run's
                # ordinals belong to the run state.
                self.context.set_dispatch(self.trace.zone(int(first[0])).name)

    def open_source_line(self, row: SourceTime) -> QWidget | None:
        """Open the input program at the line (a document of the window), where the file is readable here."""
        path, _, line = row.loc.rpartition(":")
        if not path or not line.isdigit() or not Path(path).is_file():
            self.summary.setText(f"{row.loc}: the input program is not readable here")
            return None
        from app.views.ir_viewer import IrViewer

        if self.open_document is None:
            return None
        viewer = IrViewer()
        viewer.open_file(path)
        shown = self.open_document(
            viewer, f"Source — {Path(path).name}", key=f"source:{Path(path).resolve()}"
        )
        shown.go_to_line(int(line) - 1)
        return shown

    def show_histogram(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Draw the duration histogram of ``name``; returns (counts, edges in ns)."""
        assert self.trace is not None
        durations = durations_of(self.trace, name)
        # A few zones: as many bins as zones (every zone visible as a bar of its own, not 40 hairlines).
        counts, edges = histogram(durations, bins=int(min(40, max(1, len(durations)))))
        if self._bars is not None:
            self.histogram.removeItem(self._bars)
        x0, x1 = edges[:-1] * 1e-9, edges[1:] * 1e-9
        self._bars = pg.BarGraphItem(x0=x0, x1=x1, height=counts, brush="#4e79a7", pen=pg.mkPen("#2b4a6b"))
        self.histogram.addItem(self._bars)
        self.histogram_title.mode = Qt.TextElideMode.ElideMiddle
        self.histogram_title.setText(name)
        # The range of the data, not autoRange's guess: the longest zone's bar is inside the axis. Zones that
        # all last the same (one zone) get a 1-ns bin: the axis then spans a fifth of the value around it,
        # or its ticks print ten digits each, on top of one another.
        span = max(float(x1[-1] - x0[0]), 0.2 * float(x1[-1])) or 1e-9
        middle = (float(x0[0]) + float(x1[-1])) / 2
        self.histogram.setXRange(middle - 0.55 * span, middle + 0.55 * span, padding=0)
        top = max(1, int(counts.max()) if len(counts) else 1)
        self.histogram.setYRange(0, top * 1.1, padding=0)
        step = max(1, math.ceil(top / 5))  # counts are whole: no 0.2, 0.4 ticks
        self.histogram.getAxis("left").setTickSpacing(step, step)
        return counts, edges

    def _filter(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        self._find_from = -1

    def find(self, text: str) -> ZoneInfo | None:
        """Select and show the next zone (in time) whose name contains ``text`` (case-insensitive)."""
        if self.trace is None or not text:
            return None
        wanted = [i for i, s in enumerate(self.trace.names.strings) if text.lower() in s.lower()]
        if not wanted:
            self.summary.setText(f"no zone named like {text!r}")
            return None
        z = self.trace.zones
        candidates = np.flatnonzero(np.isin(z.name, wanted))
        order = candidates[np.lexsort((z.track[candidates], z.start[candidates]))]
        # The next one after the previous find, in time order (wrapping around).
        pos = 0
        if self._find_from >= 0:
            hits = np.flatnonzero(order == self._find_from)
            pos = (int(hits[0]) + 1) % len(order) if hits.shape[0] else 0
        i = int(order[pos])
        self._find_from = i
        self.timeline.show_zone(i)
        return self.trace.zone(i)

    # -- files

    def _open_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open trace", "", TRACE_FILTER)
        if name:
            self.open_path(name)

    def dragEnterEvent(self, ev) -> None:  # noqa: N802
        if ev.mimeData() is not None and ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev) -> None:  # noqa: N802
        urls = [u for u in ev.mimeData().urls() if u.isLocalFile()]
        if urls:
            self.open_path(urls[0].toLocalFile())
            ev.acceptProposedAction()


class ZonesCompareView(QWidget):
    """Two traces side by side (A left, B right) above the per-name A/B table, slower in B first.

    For two compilations' timing this is the regression hunt: the passes that got slower are at the top.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.a = ZoneTimeline()
        self.b = ZoneTimeline()
        self.label_a = QLabel("A")
        self.label_b = QLabel("B")
        self.diff_model = DiffModel(self)
        self.table, self.proxy = stats_table(self.diff_model)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        left, right = QWidget(), QWidget()
        for w, lab, tl in ((left, self.label_a, self.a), (right, self.label_b, self.b)):
            v = QVBoxLayout(w)
            v.setContentsMargins(0, 0, 0, 0)
            v.addWidget(lab)
            v.addWidget(tl, 1)
        sides = QSplitter(Qt.Orientation.Horizontal)
        sides.addWidget(left)
        sides.addWidget(right)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(sides)
        split.addWidget(self.table)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(split)
        self.diffs: list[ZoneDiff] = []

    def set_traces(self, a: Trace, b: Trace) -> list[ZoneDiff]:
        self.a.set_trace(a)
        self.b.set_trace(b)
        sa, sb = zone_statistics(a), zone_statistics(b)
        self.label_a.setText(f"A: {Path(a.source).name or 'trace'} — {format_ns(a.span[1] - a.span[0])}")
        self.label_b.setText(f"B: {Path(b.source).name or 'trace'} — {format_ns(b.span[1] - b.span[0])}")
        self.diffs = compare(sa, sb)
        self.diff_model.set_rows(self.diffs)
        self.table.sortByColumn(5, Qt.SortOrder.DescendingOrder)
        return self.diffs

    def top_names(self, n: int) -> list[str]:
        """The first ``n`` names as the table shows them."""
        return [self.proxy.index(r, 0).data() for r in range(min(n, self.proxy.rowCount()))]

    def _on_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        name = self.proxy.index(current.row(), 0).data()
        for tl in (self.a, self.b):
            if tl.item is not None:
                tl.item.highlight_name = tl.item.trace.names.id_of(name)
                tl.item.update()


def zones_panel(services) -> ZonesView:
    """The panel factory (``PanelSpec(..., "app.views.zones_view:zones_panel", area="document")``):
    the view on the window's shared context and engine worker."""
    return ZonesView(context=services.context, worker=services.worker, open_document=services.open_document)
