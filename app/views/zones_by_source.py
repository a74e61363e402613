"""The Zones view's "By source" table: a profile's dispatch time by line of the input program.

Rows are ``engine.trace.by_source.SourceTime`` (line, op, time, share of the dispatch time, calls), the
most expensive first. Selecting a row emits ``lineSelected`` with it; the Zones view then marks the line's
dispatches in the timeline, moves the shared context to its first dispatch (the dispatch list follows)
and opens the input program at the line. Where a trace has no attribution (a trace file opened from disk,
a module whose locations are unknown) the table is empty and says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import (
    QHeaderView,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.views.elided_label import ElidedLabel
from app.views.zones_timeline import format_ns
from engine.trace.by_source import FRONTEND_OPS_SAID, Attribution, SourceTime

_ROOT = QModelIndex()
NO_ATTRIBUTION = (
    "no source attribution: profile a run of an open module (Run ▸ Profile) to see time by source line"
)


class RowsModel(QAbstractTableModel):
    """A table over a list of plain rows; subclasses name the ``COLUMNS`` and say what ``data`` shows."""

    COLUMNS: tuple[str, ...] = ()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[Any] = []

    def set_rows(self, rows: Iterable[Any]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802
        return len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.COLUMNS[section]
        return None


class CutCellsElided(QStyledItemDelegate):
    """Draws a cell the viewport's edge cuts as its visible part, elided ("906.9…"): a right-aligned number cut
    at the edge otherwise shows its first digits only ("192" of "192 ns", "90" of "906.99 µs"), which reads as
    another number. A table scrolled sideways always has such a cell."""

    def __init__(self, view: QTableView):
        super().__init__(view)
        self.view = view

    def clipped(self, option: QStyleOptionViewItem) -> QStyleOptionViewItem:
        """``option`` for the part of its cell in view, elided where the cell is cut."""
        visible = option.rect.intersected(self.view.viewport().rect())
        if visible.width() >= option.rect.width() or visible.isEmpty():
            return option
        cut = QStyleOptionViewItem(option)
        cut.rect = visible
        cut.textElideMode = Qt.TextElideMode.ElideRight
        return cut

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex) -> None:  # noqa: N802 (Qt's)
        """An IREE dispatch name too long for its cell is shown from its ``dispatch_N`` and cut at its end:
        elided in the middle, every row read "main$async_dis…x3x3_f32", the number cut out."""
        super().initStyleOption(option, index)
        text = option.text
        at = text.find("dispatch_") if text else -1
        room = option.rect.width() - 2 * option.fontMetrics.averageCharWidth()
        if at > 3 and option.fontMetrics.horizontalAdvance(text) > room:
            option.text = "…" + text[at:]
            option.textElideMode = Qt.TextElideMode.ElideRight

    def paint(self, painter, option, index) -> None:
        super().paint(painter, self.clipped(option), index)


def sortable_table(
    model: QAbstractTableModel,
    widths: Sequence[int],
    default_width: int,
    *,
    parent: QObject | None = None,
    selection: QTableView.SelectionMode = QTableView.SelectionMode.SingleSelection,
    elide: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle,
) -> tuple[QTableView, QSortFilterProxyModel]:
    """A table of whole rows over ``model``, sorted by the numbers ``model`` keeps in ``Qt.UserRole``:
    the first columns ``widths`` wide, the others ``default_width``, the last taking what room is left,
    rows one line of 20 px (a long name keeps its start and end by default; the tooltip has it all)."""
    proxy = QSortFilterProxyModel(parent)
    proxy.setSourceModel(model)
    proxy.setSortRole(Qt.ItemDataRole.UserRole)
    view = QTableView()
    view.setModel(proxy)
    view.setSortingEnabled(True)
    view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
    view.setSelectionMode(selection)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(20)
    header = view.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    for column, width in enumerate(widths):
        header.resizeSection(column, width)
    header.setDefaultSectionSize(default_width)
    header.setStretchLastSection(True)
    view.setTextElideMode(elide)
    view.setWordWrap(False)
    view.setItemDelegate(CutCellsElided(view))
    return view, proxy


class BySourceModel(RowsModel):
    """Rows of ``SourceTime``; ``Qt.UserRole`` holds numbers for sorting."""

    COLUMNS = ("line", "op", "time", "share", "calls")

    def __init__(self, parent=None):
        super().__init__(parent)
        self.total_ns = 0

    def set_attribution(self, attribution: Attribution | None) -> None:
        self.total_ns = attribution.dispatch_time_ns if attribution is not None else 0
        self.set_rows(attribution.by_source if attribution is not None else [])

    def share(self, row: SourceTime) -> float:
        return row.time_ns / self.total_ns if self.total_ns else 0.0

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        r = self.rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.UserRole:
            return (line_label(r), r.op_said(""), r.time_ns, self.share(r), r.calls)[col]
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return line_label(r)
            if col == 1:
                return short_op(r.op_said("(op unknown: the program is not readable here)"))
            if col == 2:
                return format_ns(r.time_ns)
            if col == 3:
                return f"{self.share(r) * 100:.1f} %"
            return f"{r.calls:,}"
        if role == Qt.ItemDataRole.ToolTipRole:
            where = r.loc + f"  {r.op_said('')}".rstrip()
            where += f"\nPython: {r.python}" if r.python and r.python != r.loc else ""
            return f"{where}\n{len(r.dispatches)} dispatches:\n" + "\n".join(r.dispatches[:20])
        if role == Qt.ItemDataRole.TextAlignmentRole and col >= 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def short_op(op: str) -> str:
    """``onnx.Conv`` for ``torch.operator "onnx.Conv"`` (an ONNX import's op by its own name); others as written."""
    if op.startswith("torch.operator "):
        return op.partition(" ")[2].strip('"')
    return op


def line_label(row: SourceTime) -> str:
    """``file.mlir:39`` (the file's name and line; the tooltip has the whole path), and the Python line."""
    path, _, line = row.loc.rpartition(":")
    label = f"{Path(path).name}:{line}" if path else row.loc
    if not row.python or row.python == row.loc:
        return label
    return label + f" ({Path(row.python.rpartition(':')[0]).name}:{row.python.rpartition(':')[2]})"


class BySourceTable(QWidget):
    """The table with a line saying what it holds (the split rule, notes) or why it is empty."""

    lineSelected = Signal(object)  # SourceTime

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = BySourceModel(self)
        self.table, self.proxy = sortable_table(self.model, (170, 200), 80, parent=self)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        self.note = ElidedLabel(NO_ATTRIBUTION)  # one line, "…" where cut; the whole text is in the tooltip
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)

    def set_attribution(self, attribution: Attribution | None, why_not: str | None = None) -> None:
        self.model.set_attribution(attribution)
        self.table.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        if attribution is None:
            self.note.setText(why_not or NO_ATTRIBUTION)
            self.note.setToolTip(why_not or NO_ATTRIBUTION)
            return
        self.note.setText(
            f"{format_ns(attribution.dispatch_time_ns)} of dispatch time on {len(attribution.by_source)} lines, "
            f"{attribution.coverage * 100:.1f} % on lines holding the frontend's ops ({FRONTEND_OPS_SAID})"
        )
        self.note.setToolTip("\n".join([self.note.text(), attribution.rule, *attribution.notes]))

    def row_at(self, proxy_row: int) -> SourceTime:
        return self.model.rows[self.proxy.mapToSource(self.proxy.index(proxy_row, 0)).row()]

    def select_row(self, proxy_row: int) -> None:
        self.table.selectRow(proxy_row)

    def _on_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.lineSelected.emit(self.row_at(current.row()))
