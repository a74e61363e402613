"""The tensor inspector: each input and output of a dispatch, with statistics, a 2-D slice as a table and
as a heatmap, a histogram, and a comparison with golden data or another run.

The engine (``engine.dispatch``) keeps and computes; this view draws. Big tensors stay fluid: the table
model is asked only for visible cells, and the heatmap shows at most ``MAX_PIXELS`` samples per side of
the visible region (re-sampled at full resolution when the user zooms in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QAbstractTableModel, QEvent, QModelIndex, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMenu,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.elided_label import ElidedLabel
from app.views.verdict_style import verdict_colour
from engine.dispatch.numerics import Comparison, Tolerance, compare, error_map, load_golden
from engine.dispatch.statistics import TensorStats, histogram, plane, tensor_stats
from engine.dispatch.tensor_types import TensorType, element_name, packed_type, unpacked_values, view_bytes

MAX_PIXELS = 1024
_ROOT = QModelIndex()  # the invalid parent of a flat table


COMPARE_SUMMARY_LINES = 3  # of the verdict and its metrics in sight (the rest scrolled)
COMPARE_HEATMAP_MIN = 100  # pixels of the error heatmap, at least


@dataclass
class InspectedTensor:
    """One tensor shown by the inspector: a label (``output 0``), its array and its type."""

    label: str
    array: np.ndarray
    type_text: str = ""
    reference: np.ndarray | None = None  # the same tensor in another run / golden data
    # The list item's first line when it is shorter than the label (""): what the view says elsewhere left out.
    list_label: str = ""
    list_state: str = ""  # said after the type on the item's second line ("not written yet")
    element: str = ""  # the element type where the array's dtype only stores it (i4 unpacked to int8)

    def __post_init__(self) -> None:
        # A complex tensor (IREE's trace of complex<f32>) as its (re, im) pairs, one more axis of 2: the
        # statistics, heatmap and histogram are of real numbers, and widening complex to real would drop the
        # imaginary part (and its NaN). Said in the type.
        a = np.asarray(self.array)
        if a.dtype.kind == "c":
            element = "complex<f32>" if a.dtype.itemsize == 8 else "complex<f64>"
            shown = self.type_text or "x".join([*(str(d) for d in a.shape), element])
            self.type_text = f"{shown}, as (re, im) pairs"
            self.array = _as_pairs(a)
        if self.reference is not None and np.asarray(self.reference).dtype.kind == "c":
            self.reference = _as_pairs(np.asarray(self.reference))


def _as_pairs(a: np.ndarray) -> np.ndarray:
    """A complex array as real pairs: shape + (2,), the real part first (numpy's layout, and IREE's)."""
    part = np.float32 if a.dtype.itemsize == 8 else np.float64
    return np.ascontiguousarray(a).view(part).reshape(*a.shape, 2)


# Non-finite values in a colour no colour map uses (viridis runs purple-blue-green-yellow): NaN magenta,
# +Inf red, -Inf orange, in the heatmap (an overlay) and the table (cell background).
NAN_RGBA = (255, 0, 255, 255)
POSINF_RGBA = (230, 20, 20, 255)
NEGINF_RGBA = (255, 150, 0, 255)
NAN_CELL = QColor(255, 170, 255)
INF_CELL = QColor(255, 190, 150)
MINUS = "\u2212"  # the minus sign (wider than "-", so "−Inf" reads as a name, not a hyphen)
# The overlay's entries in legend order: name and colour.
OVERLAY_ENTRIES = (("NaN", NAN_RGBA), ("+Inf", POSINF_RGBA), (f"{MINUS}Inf", NEGINF_RGBA))


def nonfinite_counts(values: np.ndarray) -> dict[str, int]:
    """NaN, +Inf and −Inf counts of a float array, keyed by the legend's names (all 0 for other types)."""
    a = np.asarray(values)
    if a.dtype.kind not in "fc" or a.size == 0:
        return {name: 0 for name, _ in OVERLAY_ENTRIES}
    if np.isfinite(a).all():  # one pass for the common case
        return {name: 0 for name, _ in OVERLAY_ENTRIES}
    counts = (np.isnan(a), np.isposinf(a), np.isneginf(a))
    return {name: int(np.count_nonzero(m)) for (name, _), m in zip(OVERLAY_ENTRIES, counts)}


def nonfinite_name(value) -> str | None:
    """``NaN``, ``+Inf`` or ``−Inf`` for a non-finite float, else None."""
    if np.asarray(value).dtype.kind not in "fc":
        return None
    v = float(value)
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "+Inf" if v > 0 else f"{MINUS}Inf"
    return None


def legend_html(counts: dict[str, int], totals: dict[str, int] | None = None) -> str:
    """The overlay legend: a coloured square, the name and the count of each entry present (in the plane
    shown, ``counts``, or in the whole tensor, ``totals``); "" when there is none."""
    parts = []
    for name, (r, g, b, _) in OVERLAY_ENTRIES:
        here = counts.get(name, 0)
        total = here if totals is None else totals.get(name, 0)
        if not (here or total):
            continue
        n = f"{here:,}" if total == here else f"{here:,} in this slice, {total:,} in tensor"
        parts.append(f'<span style="color: #{r:02x}{g:02x}{b:02x}">\u25a0</span> {name} {n}')
    return "&nbsp;&nbsp;&nbsp;".join(parts)


def first_nonfinite(array: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first NaN or Inf of a float array (C order), or None."""
    a = np.asarray(array)
    if a.dtype.kind not in "fc" or a.size == 0:
        return None
    bad = ~np.isfinite(a.astype(np.float32) if a.dtype.itemsize < 2 else a)
    if not bad.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape))


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def stats_text(s: TensorStats) -> str:
    """The stats line. With NaN/Inf present their counts come first (the line is elided at its end) and the
    statistics say they are of the finite values: "min 0 max 0" of a tensor full of -Inf read as all zeros."""
    shape = "x".join(str(d) for d in s.shape) or "scalar"
    nonfinite = f"NaN {s.nan}   +Inf {s.posinf}, {MINUS}Inf {s.neginf}"
    numbers = f"min {_fmt(s.min)}   max {_fmt(s.max)}   mean {_fmt(s.mean)}   std {_fmt(s.std)}"
    if s.healthy:
        return f"{shape} {s.element}   {numbers}   {nonfinite}"
    return f"{shape} {s.element}   {nonfinite}   of the {s.finite} finite values: {numbers}"


class PlaneModel(QAbstractTableModel):
    """A 2-D numpy array as a table; Qt asks only for the cells it shows, so size does not matter."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.values = np.zeros((0, 0))

    def set_plane(self, values: np.ndarray) -> None:
        self.beginResetModel()
        self.values = values
        self.endResetModel()

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt's name)
        return 0 if parent.isValid() else int(self.values.shape[0])

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else int(self.values.shape[1])

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and index.isValid():
            v = self.values[index.row(), index.column()]
            return str(v) if self.values.dtype.kind in "iub" else f"{float(v):.6g}"
        if role == Qt.ItemDataRole.BackgroundRole and index.isValid() and self.values.dtype.kind == "f":
            v = float(self.values[index.row(), index.column()])
            if np.isnan(v):
                return QBrush(NAN_CELL)
            if np.isinf(v):
                return QBrush(INF_CELL)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole:
            return str(section)
        return None


class Heatmap(pg.GraphicsLayoutWidget):
    """A 2-D array as an image with a colour bar; hovering reports the index and value under the mouse, a
    click selects that element (outlined; the inspector's selected element, as a table cell is).

    NaN/Inf are painted over the colour map, explained by a legend under the image (the entries present,
    with counts) and by a tooltip over an overlay pixel (``−Inf at [r, c]``).

    Only the visible region is sampled (at most ``MAX_PIXELS`` per side): zooming in re-samples it.
    """

    hovered = Signal(int, int, object)  # row, column, value
    clicked = Signal(int, int)  # row, column
    contextRequested = Signal(int, int, object)  # row, column, screen point: a right-click (ask_on_right_click)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.values = np.zeros((1, 1), np.float32)
        self.view = self.addViewBox(lockAspect=False, invertY=True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("viridis"))
        self.view.addItem(self.image)
        # NaN / Inf painted over the colour map (transparent elsewhere), so they never look like data.
        self.nonfinite = pg.ImageItem(axisOrder="row-major")
        self.nonfinite.setZValue(1)
        self.view.addItem(self.nonfinite)
        self.nonfinite_count = 0  # non-finite pixels in the sampled block (what the overlay shows)
        self.colorbar = pg.ColorBarItem(colorMap=pg.colormap.get("viridis"), interactive=False, width=12)
        self.colorbar.setImageItem(self.image)
        self.addItem(self.colorbar)
        self.colorbar.setVisible(False)  # until values with a range are shown (no made-up 0..1 scale)
        self.nextRow()
        self.legend = pg.LabelItem("", justify="left", size="9pt")
        self.addItem(self.legend, colspan=2)
        self.legend_counts: dict[str, int] = nonfinite_counts(self.values)
        self.levels = (0.0, 1.0)
        self.sampled: tuple[int, int, int, int, int, int] = (0, 1, 1, 0, 1, 1)  # r0, r1, rs, c0, c1, cs
        self._resample = QTimer(self, singleShot=True, interval=60)
        self._resample.timeout.connect(self._sample_visible)
        self.view.sigRangeChanged.connect(lambda *_: self._resample.start())
        self.scene().sigMouseMoved.connect(self._mouse_moved)
        # The selected element, outlined in white over black (seen on any colour of the map).
        self.marker = QGraphicsRectItem()
        self.marker.setPen(pg.mkPen("w", width=2, cosmetic=True))
        self.marker.setZValue(2)
        self.marker.hide()
        self.view.addItem(self.marker)
        self.scene().sigMouseClicked.connect(self._mouse_clicked)

    def set_values(
        self, values: np.ndarray, levels: tuple[float, float] | None = None, totals: dict[str, int] | None = None
    ) -> None:
        """Show ``values``; ``totals``: the whole tensor's non-finite counts when ``values`` is one slice."""
        self.values = values
        self.legend_counts = nonfinite_counts(values)
        text = legend_html(self.legend_counts, totals)
        self.legend.setText(text)
        # An empty legend takes no room under the image.
        self.legend.setMaximumHeight(16777215 if text else 0)
        self.legend.setVisible(bool(text))
        self.nonfinite.setToolTip("")
        if levels is None:
            levels = _finite_levels(values)
        # One value, or none finite: a colour bar would show a made-up range (-0.5..0.5 around an all-zero
        # tensor); the legend says what the map shows instead.
        single = None if levels is None else levels[0] if levels[0] == levels[1] else False
        self.colorbar.setVisible(single is False)
        if single is not False:
            said = "no finite value" if single is None else f"every finite value is {single:.6g}"
            text = f"{said} (one colour)" + (f"   {text}" if text else "")
            self.legend.setText(text)
            self.legend.setMaximumHeight(16777215)
            self.legend.setVisible(True)
            levels = (0.0, 1.0) if single is None else (single - 0.5, single + 0.5)  # (any span: one colour)
        self.levels = levels
        self._sample(0, values.shape[0], 0, values.shape[1])
        self.view.setRange(QRectF(0, 0, values.shape[1], values.shape[0]), padding=0)
        self.marker.hide()  # another slice or tensor: the selection was in the last one

    def _sample(self, r0: int, r1: int, c0: int, c1: int) -> None:
        rs = max(1, -(-(r1 - r0) // MAX_PIXELS))
        cs = max(1, -(-(c1 - c0) // MAX_PIXELS))
        block = np.asarray(self.values[r0:r1:rs, c0:c1:cs], dtype=np.float32)
        self.sampled = (r0, r1, rs, c0, c1, cs)
        self.image.setImage(block, levels=self.levels, autoLevels=False)
        rect = QRectF(c0, r0, block.shape[1] * cs, block.shape[0] * rs)
        self.image.setRect(rect)
        overlay = np.zeros((*block.shape, 4), np.uint8)
        for mask, rgba in ((np.isnan(block), NAN_RGBA), (np.isposinf(block), POSINF_RGBA), (np.isneginf(block), NEGINF_RGBA)):
            overlay[mask] = rgba
        self.nonfinite_count = int(np.count_nonzero(overlay[..., 3]))
        self.nonfinite.setImage(overlay, levels=(0, 255), autoLevels=False)
        self.nonfinite.setRect(rect)
        self.nonfinite.setVisible(self.nonfinite_count > 0)
        self.colorbar.setLevels(self.levels)

    def _sample_visible(self) -> None:
        (x0, x1), (y0, y1) = self.view.viewRange()
        rows, cols = self.values.shape
        r0, r1 = max(0, int(y0)), min(rows, int(np.ceil(y1)) + 1)
        c0, c1 = max(0, int(x0)), min(cols, int(np.ceil(x1)) + 1)
        if r1 <= r0 or c1 <= c0:
            return
        if (r0, r1, c0, c1) != (self.sampled[0], self.sampled[1], self.sampled[3], self.sampled[4]):
            self._sample(r0, r1, c0, c1)

    def mark(self, r: int | None, c: int | None) -> None:
        """Outline element [r, c] (None: no element is selected)."""
        if r is None or c is None or not (0 <= r < self.values.shape[0] and 0 <= c < self.values.shape[1]):
            self.marker.hide()
            return
        self.marker.setRect(QRectF(c, r, 1, 1))
        self.marker.show()

    def _element_at(self, pos) -> tuple[int, int] | None:
        if not self.view.sceneBoundingRect().contains(pos):
            return None
        p = self.view.mapSceneToView(pos)
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        return (r, c) if 0 <= r < self.values.shape[0] and 0 <= c < self.values.shape[1] else None

    def ask_on_right_click(self) -> None:
        """A right-click on an element selects it and asks its owner for a menu (``contextRequested``), in
        place of pyqtgraph's view menu (whose "View All" that menu offers)."""
        self.view.setMenuEnabled(False)
        self._asks = True

    def _mouse_clicked(self, event) -> None:
        right = event.button() == Qt.MouseButton.RightButton and getattr(self, "_asks", False)
        if event.button() != Qt.MouseButton.LeftButton and not right:
            return
        at = self._element_at(event.scenePos())
        if at is not None:
            self.mark(*at)
            self.clicked.emit(*at)
            if right:
                self.contextRequested.emit(*at, event.screenPos().toPoint())

    def _mouse_moved(self, pos) -> None:
        at = self._element_at(pos)
        if at is None:
            return
        r, c = at
        value = self.values[r, c]
        # The overlay item's tooltip follows the mouse (Qt shows it when the mouse rests): cheap, since the
        # value under the mouse is read anyway.
        name = nonfinite_name(value)
        self.nonfinite.setToolTip(f"{name} at [{r}, {c}]" if name else "")
        self.hovered.emit(r, c, value)


def _finite_levels(values: np.ndarray) -> tuple[float, float] | None:
    sample = np.asarray(values[:: max(1, values.shape[0] // 512), :: max(1, values.shape[1] // 512)])
    sample = sample.astype(np.float64)
    finite = sample[np.isfinite(sample)]
    if finite.size == 0:
        return None
    return float(finite.min()), float(finite.max())


class TensorInspector(QWidget):
    """Tensors of one dispatch (or any arrays): pick one, see its numbers, compare it, save it."""

    saved = Signal(str)  # the .npy file a tensor was saved to
    elementQuestioned = Signal(object)  # the index of an element asked about (``ask_about_elements``)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.tensors: list[InspectedTensor] = []
        self.current: InspectedTensor | None = None
        self.array: np.ndarray = np.zeros(0)  # the current tensor as typed now
        self.stats: TensorStats | None = None
        self.comparison: Comparison | None = None
        self.first_bad: tuple[int, ...] | None = None
        # What the table's context menu asks of an element (ask_about_elements).
        self._question: str | Callable[[tuple[int, ...]], str] = ""
        self._list_width = 0  # what the tensor list's lines need (set with the tensors)
        self._build_list()
        self._build_slice_controls()
        self._build_views()
        self._build_tabs(self._build_compare_page())
        self._lay_out()

    # -- construction

    def _build_list(self) -> None:
        """The tensors (one two-line item each: the binding, then the type) and the current one's summary."""
        self.tensor_list = QListWidget(self)
        self.tensor_list.setObjectName("inspectorTensors")
        self.tensor_list.setWordWrap(True)
        self.tensor_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.tensor_list.currentRowChanged.connect(self._show_index)
        # One line elided with "…" where the window ends (it was cut mid-number at 1366 px), whole in its
        # tooltip and its context menu's Copy; never one that widens the window.
        self.summary = ElidedLabel("No tensor.", self)
        self.summary.setObjectName("inspectorSummary")
        self.hover = QLabel("", self)

    def _build_slice_controls(self) -> None:
        """Which two axes are rows/columns and the index along the others; the type override (reinterpret the
        bytes as ``4x16xf32``); the first NaN/Inf; saving the tensor as a .npy file."""
        self.row_axis = QComboBox(self)
        self.col_axis = QComboBox(self)
        self.row_axis.currentIndexChanged.connect(self._axes_changed)
        self.col_axis.currentIndexChanged.connect(self._axes_changed)
        self.index_box = QHBoxLayout()
        self.index_spins: list[QSpinBox] = []
        self.type_edit = QLineEdit(self)
        self.type_edit.setPlaceholderText("type, e.g. 4x16xf32")
        self.type_edit.returnPressed.connect(self._apply_type)
        self.type_edit.textChanged.connect(self._fit_type_edit)
        self.type_error = QLabel("", self)
        # A short text: "Go to first NaN/Inf" made the slice row ~420 px, which left the tensor list 160 px of a
        # 1366-px window's ~600 (every binding's label wrapped).
        self.first_nan_button = QPushButton("First NaN/Inf", self)
        self.first_nan_button.setObjectName("inspectorFirstNaN")
        self.first_nan_button.setToolTip("Show the slice holding the first NaN or Inf and select it in the table")
        self.first_nan_button.setEnabled(False)
        self.first_nan_button.clicked.connect(self.go_to_first_nonfinite)
        self.save_button = QPushButton("Save as .npy…", self)
        self.save_button.setObjectName("inspectorSaveNpy")
        self.save_button.setToolTip("Write this tensor, as typed now, to a .npy file (numpy.save)")
        self.save_button.setEnabled(False)
        self.save_button.clicked.connect(self._ask_and_save)

    def _build_views(self) -> None:
        self.table_model = PlaneModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.table_model)
        self.heatmap = Heatmap(self)
        self.heatmap.hovered.connect(self._hovered)
        # One selected element, whichever view picked it: a heatmap click selects the table's cell, a table
        # cell is outlined on the heatmap.
        self.heatmap.clicked.connect(self._heatmap_clicked)
        self.table.selectionModel().currentChanged.connect(
            lambda cell, _previous: self.heatmap.mark(cell.row(), cell.column()) if cell.isValid() else self.heatmap.mark(None, None)
        )
        self.histogram = pg.PlotWidget(self)
        self.histogram.setLabel("bottom", "value")
        self.histogram.setLabel("left", "count")

    def _build_compare_page(self) -> QWidget:
        """Compare: golden file or the reference set by the caller; tolerances (all 0: numerics' rounding rule,
        relative to the tensor's scale); the verdict with its metrics; error heatmap."""
        self.atol = QDoubleSpinBox(self, decimals=8, maximum=1e9, singleStep=1e-6)
        self.rtol = QDoubleSpinBox(self, decimals=8, maximum=1e9, singleStep=1e-6)
        self.ulps = QSpinBox(self, maximum=1 << 30)
        for box in (self.atol, self.rtol):
            box.setSpecialValueText("default")
            box.valueChanged.connect(self._compare)
        self.ulps.setSpecialValueText("default")
        self.ulps.valueChanged.connect(self._compare)
        self.golden_button = QPushButton("Load golden .npy/.npz…", self)
        self.golden_button.clicked.connect(self._pick_golden)
        self.compare_summary = QLabel("No reference: load golden data or open another run.", self)
        self.compare_summary.setWordWrap(True)
        self.error_heatmap = Heatmap(self)
        page = QWidget(self)
        column = QVBoxLayout(page)
        # The file on one row, the tolerances on the next: in one row they needed ~700 px and the rtol field
        # was cut at 1366x768 (the inspector has ~480 px there).
        row = QHBoxLayout()
        row.addWidget(self.golden_button)
        row.addStretch(1)
        column.addLayout(row)
        tolerances = QHBoxLayout()
        for name, box in (("atol", self.atol), ("rtol", self.rtol), ("ulps", self.ulps)):
            box.setMinimumWidth(80)  # not the width of 1e9 at 8 decimals, the hint Qt would ask for
            tolerances.addWidget(QLabel(name))
            tolerances.addWidget(box)
        tolerances.addStretch(1)
        column.addLayout(tolerances)
        # The verdict and its metrics are six lines: at most three in sight (the verdict first, the rest scrolled)
        # and the error heatmap at least COMPARE_HEATMAP_MIN tall; in a 1366x768 window the summary had squeezed
        # it to a 60-px strip.
        self.compare_summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.compare_summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.compare_summary_area = QScrollArea(self)
        self.compare_summary_area.setWidget(self.compare_summary)
        self.compare_summary_area.setWidgetResizable(True)
        self.compare_summary_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.compare_summary_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.compare_summary_area.installEventFilter(self)  # its height follows its text (_fit_compare_summary)
        column.addWidget(self.compare_summary_area)
        self.error_heatmap.setMinimumHeight(COMPARE_HEATMAP_MIN)
        column.addWidget(self.error_heatmap, 1)
        # In a scroll area the controls never set the document's minimum width (which squeezed the side docks
        # to their floors in a 1366-px window at every stop).
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(page)
        return scroll

    def _build_tabs(self, compare_page: QWidget) -> None:
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.heatmap, "Heatmap")
        self.tabs.addTab(self.table, "Table")
        self.tabs.addTab(self.histogram, "Histogram")
        self.tabs.addTab(compare_page, "Compare")

    def _lay_out(self) -> None:
        controls = QFormLayout()
        axes = QHBoxLayout()
        axes.addWidget(QLabel("rows"))
        axes.addWidget(self.row_axis)
        axes.addWidget(QLabel("columns"))
        axes.addWidget(self.col_axis)
        axes.addLayout(self.index_box)
        axes.addStretch(1)
        axes.addWidget(self.first_nan_button)
        controls.addRow("Slice", axes)
        type_row = QHBoxLayout()
        type_row.addWidget(self.type_edit)
        type_row.addWidget(self.type_error, 1)
        type_row.addWidget(self.save_button)
        controls.addRow("Type", type_row)
        right = QWidget(self)
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.summary)
        column.addLayout(controls)
        column.addWidget(self.tabs, 1)
        column.addWidget(self.hover)
        self.splitter = QSplitter(self)
        self.splitter.addWidget(self.tensor_list)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 4)
        self.splitter.setSizes([240, 800])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)

    # -- public

    def set_tensors(self, tensors: list[InspectedTensor]) -> None:
        self.tensors = list(tensors)
        self.tensor_list.clear()
        for t in self.tensors:
            self.tensor_list.addItem(list_item_text(t.list_label or t.label, t.type_text, t.list_state))
            self.tensor_list.item(self.tensor_list.count() - 1).setToolTip(f"{t.label}  {t.type_text}")
        self._fit_list()
        if self.tensors:
            self.tensor_list.setCurrentRow(0)
        else:
            self.current = None
            self.summary.setText("No tensor.")
            self.save_button.setEnabled(False)

    def _fit_list(self) -> None:
        """The list as wide as its widest line (a binding's label, or its type), so
        "binding 0 @1028800, read, input 0" is read whole instead of cut to "binding 0 @1…" in a 1366-px window
        (within two fifths of the inspector; a longer line wraps)."""
        metrics = self.tensor_list.fontMetrics()
        lines = [line for i in range(self.tensor_list.count()) for line in self.tensor_list.item(i).text().split("\n")]
        if not lines:
            return
        frame = 2 * self.tensor_list.frameWidth() + self.tensor_list.verticalScrollBar().sizeHint().width()
        wanted = max(metrics.horizontalAdvance(line) for line in lines) + frame + 4 * metrics.averageCharWidth()
        width = min(wanted, max(160, 2 * self.width() // 5))  # longer lines wrap (setWordWrap)
        sizes = self.splitter.sizes()
        if sum(sizes) > 0 and sizes[0] < width:
            self.splitter.setSizes([width, max(1, sum(sizes) - width)])
        self.tensor_list.setMinimumWidth(min(width, 160))
        self._list_width = width

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if self.tensor_list.count() and self.splitter.sizes()[0] < self._list_width:
            self._fit_list()

    def _fit_compare_summary(self) -> None:
        """The summary's area as tall as its text at its width, up to COMPARE_SUMMARY_LINES lines."""
        width = self.compare_summary_area.viewport().width()
        label = self.compare_summary
        needed = label.heightForWidth(width) if width > 0 else label.sizeHint().height()
        most = label.fontMetrics().lineSpacing() * COMPARE_SUMMARY_LINES + 2
        self.compare_summary_area.setFixedHeight(min(max(needed, 0) + 2, most))

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.compare_summary_area and event.type() == QEvent.Type.Resize:
            self._fit_compare_summary()
        return False

    def save_current(self, path: str | Path) -> Path:
        """Write the current tensor, as typed now (the Type field's reading of its bytes), to ``path`` (``.npy``
        added when missing); ``saved`` tells where."""
        path = Path(path)
        if path.suffix.lower() != ".npy":
            path = path.with_name(path.name + ".npy")
        np.save(path, self.array)
        self.saved.emit(str(path))
        return path

    def _ask_and_save(self) -> None:
        if self.current is None:
            return
        name = "".join(c if c.isalnum() else "_" for c in self.current.label.split(" — ")[0]).strip("_")
        target, _ = QFileDialog.getSaveFileName(self, "Save tensor as .npy", f"{name}.npy", "NumPy arrays (*.npy)")
        if not target:
            return
        try:
            self.save_current(target)
        except OSError as e:
            self.summary.setText(f"Not saved: {e}")

    def set_reference(self, position: int, reference: np.ndarray | None) -> None:
        """Compare tensor ``position`` with ``reference`` (the same tensor of another run)."""
        self.tensors[position].reference = reference
        if self.current is self.tensors[position]:
            self._compare()

    def load_golden(self, path: str) -> None:
        """Golden data for the current tensor: the .npy, or the .npz entry at its position (or its label)."""
        arrays = load_golden(path)
        if self.current is None or not arrays:
            return
        names = dict(arrays)
        position = self.tensors.index(self.current)
        chosen = names.get(self.current.label) or arrays[min(position, len(arrays) - 1)][1]
        self.current.reference = chosen
        self._compare()

    # -- showing one tensor

    def _show_index(self, i: int) -> None:
        if not 0 <= i < len(self.tensors):
            return
        self.current = self.tensors[i]
        self.array = np.asarray(self.current.array)
        self.type_edit.setText(self.current.type_text or _type_text(self.array))
        self.type_edit.setCursorPosition(0)  # the start of a long type, if it must scroll at all
        self.type_error.setText("")
        self._show_array()

    def _fit_type_edit(self, text: str) -> None:
        """The Type field as wide as its text (``1024 bytes, untyped`` whole), the full text as its tooltip."""
        metrics = self.type_edit.fontMetrics()
        shown = text or self.type_edit.placeholderText()
        # The text plus the line edit's frame and text margins (a few characters' worth).
        self.type_edit.setMinimumWidth(metrics.horizontalAdvance(shown) + metrics.averageCharWidth() * 3)
        self.type_edit.setToolTip(f"{text}\nType a type (e.g. 4x16xf32) and press Enter to read the bytes as it")

    def _show_array(self) -> None:
        a = self.array
        self.stats = tensor_stats(a)
        if self.current.element and a is self.current.array:  # not retyped: its element is the source's
            self.stats = replace(self.stats, element=self.current.element)
        self.first_bad = first_nonfinite(a)
        text = f"{self.current.label}: {stats_text(self.stats)}"
        if self.first_bad is not None:
            where = ", ".join(map(str, self.first_bad))
            text += f"   first non-finite at [{where}] (NaN magenta, +Inf red, {MINUS}Inf orange)"
        self.summary.setText(text)
        self.first_nan_button.setEnabled(self.first_bad is not None)
        self.save_button.setEnabled(True)
        dims = [f"d{k} ({n})" for k, n in enumerate(a.shape)] or ["scalar"]
        # Below two dimensions there is nothing to choose: a 1-D tensor is one row of its d0, a scalar one cell
        # (offering d0 for the rows and the columns alike read as a choice that changed nothing).
        row_items = dims if a.ndim >= 2 else ["one row" if a.ndim == 1 else "scalar"]
        for combo, items, default in ((self.row_axis, row_items, max(0, a.ndim - 2)),
                                      (self.col_axis, dims, max(0, a.ndim - 1))):  # fmt: skip
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(items)
            combo.setCurrentIndex(default)
            combo.setEnabled(a.ndim >= 2)
            combo.blockSignals(False)
        self._axes_changed()
        counts, edges = histogram(a)
        self.histogram.clear()
        self.histogram.plot(edges, counts, stepMode="center", fillLevel=0, brush=(80, 140, 220, 160))
        left_out = self.stats.count - self.stats.finite
        # The bars are of the finite values only: say what they leave out rather than let it pass unseen.
        self.histogram.setTitle(f"finite values only: {left_out} NaN/Inf not drawn" if left_out else None)
        self._compare()

    def _axes_changed(self) -> None:
        a = self.array
        for spin in self.index_spins:
            self.index_box.removeWidget(spin)
            spin.deleteLater()
        self.index_spins = []
        if a.ndim >= 2:
            rows, cols = self.row_axis.currentIndex(), self.col_axis.currentIndex()
            if rows == cols:
                cols = a.ndim - 1 if rows != a.ndim - 1 else a.ndim - 2
            for d in range(a.ndim):
                if d in (rows, cols):
                    continue
                spin = QSpinBox(self, minimum=0, maximum=max(0, a.shape[d] - 1))
                spin.setPrefix(f"d{d}=")
                spin.valueChanged.connect(self._update_plane)
                self.index_box.addWidget(spin)
                self.index_spins.append(spin)
        self._update_plane()

    def go_to_first_nonfinite(self) -> tuple[int, ...] | None:
        """Show the first NaN/Inf: its slice (rows and columns the last two axes), its cell selected in the
        table (which comes to the front); returns its index."""
        index = self.first_bad
        if index is None:
            return None
        a = self.array
        if a.ndim >= 2:
            self.row_axis.setCurrentIndex(a.ndim - 2)
            self.col_axis.setCurrentIndex(a.ndim - 1)
            for spin, value in zip(self.index_spins, index[:-2]):
                spin.setValue(value)
            row, col = index[-2], index[-1]
        else:
            row, col = 0, index[0] if index else 0
        self.tabs.setCurrentWidget(self.table)
        cell = self.table_model.index(row, col)
        self.table.setCurrentIndex(cell)
        self.table.scrollTo(cell)
        return index

    def ask_about_elements(self, question: str | Callable[[tuple[int, ...]], str]) -> None:
        """Offer ``question`` in the table's context menu for the cell under the pointer ("When did {}
        change?": {} is the element's index; or a function of the index giving the text, "" for none); its
        answer is the owner's, told by ``elementQuestioned``."""
        self._question = question
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._element_menu)
        self.heatmap.ask_on_right_click()
        self.heatmap.contextRequested.connect(self._heatmap_menu)

    def _heatmap_menu(self, r: int, c: int, where) -> None:
        self.heatmap_menu(r, c).popup(where)

    def heatmap_menu(self, r: int, c: int) -> QMenu:
        """The heatmap's context menu for element [r, c] of the slice (selected): the question asked of it,
        and View All (what pyqtgraph's own menu offered)."""
        menu = self.element_menu(self.table_model.index(r, c)) or QMenu(self.heatmap)
        menu.addAction("View All", self.heatmap.view.autoRange)
        return menu

    def _element_menu(self, pos) -> None:
        menu = self.element_menu(self.table.indexAt(pos))
        if menu is not None:
            menu.popup(self.table.viewport().mapToGlobal(pos))

    def element_menu(self, cell: QModelIndex) -> QMenu | None:
        """The table's context menu for ``cell`` (selected): the question asked of its element."""
        if not cell.isValid() or not self._question:
            return None
        self.table.setCurrentIndex(cell)
        index = self.selected_element()
        if index is None:
            return None
        question = self._question
        text = question(index) if callable(question) else question.format(", ".join(str(i) for i in index))
        if not text:
            return None
        menu = QMenu(self.table)
        action = menu.addAction(text)
        action.triggered.connect(lambda: self.elementQuestioned.emit(index))
        return menu

    def element_place(self, index: tuple[int, ...]) -> tuple[int, int, str] | None:
        """(byte offset, byte length, element type) of element ``index`` of the tensor as typed now, in the
        bytes it came with; None where it is not one run of them (a type unpacked from packed bytes)."""
        if self.current is None:
            return None
        a, raw = self.array, np.asarray(self.current.array)
        if self.current.element or a.nbytes != raw.nbytes or not a.flags.c_contiguous or a.size == 0:
            return None
        if not np.may_share_memory(a, raw) and not (a.dtype == raw.dtype and a.shape == raw.shape):
            return None  # not a view of the bytes (an unpacked i4): where an element lies is not known
        flat = int(np.ravel_multi_index(index, a.shape)) if a.ndim else 0
        return flat * a.dtype.itemsize, a.dtype.itemsize, element_name(a.dtype)

    def selected_element(self) -> tuple[int, ...] | None:
        """The index (in the current tensor) of the table's selected cell, or None when none is selected."""
        cell = self.table.currentIndex()
        a = self.array
        if not cell.isValid() or a.size == 0:
            return None
        if a.ndim == 0:
            return ()
        if a.ndim == 1:
            return (min(cell.column(), a.shape[0] - 1),)
        rows, cols = self.row_axis.currentIndex(), self.col_axis.currentIndex()
        if rows == cols:
            cols = a.ndim - 1 if rows != a.ndim - 1 else a.ndim - 2
        index = [0] * a.ndim
        others = [d for d in range(a.ndim) if d not in (rows, cols)]
        for spin, d in zip(self.index_spins, others):
            index[d] = min(max(spin.value(), 0), a.shape[d] - 1)
        index[rows], index[cols] = cell.row(), cell.column()
        return tuple(index)

    def current_plane(self, array: np.ndarray | None = None) -> np.ndarray:
        """The slice shown (of ``array``, default the current tensor; same shape as it)."""
        a = self.array if array is None else array
        if a.ndim < 2:
            return plane(a)
        rows, cols = self.row_axis.currentIndex(), self.col_axis.currentIndex()
        if rows == cols:
            cols = a.ndim - 1 if rows != a.ndim - 1 else a.ndim - 2
        return plane(a, (rows, cols), tuple(s.value() for s in self.index_spins))

    def _update_plane(self) -> None:
        p = self.current_plane()
        self.table_model.set_plane(p)
        values = p if p.dtype.kind in "fiub" and p.dtype.itemsize >= 1 else p.astype(np.float32)
        if values.dtype == np.bool_:
            values = values.astype(np.uint8)
        levels = (self.stats.min, self.stats.max) if self.stats and self.stats.min is not None else None
        totals = None
        if self.stats is not None and self.array.ndim > 2:  # the heatmap shows one slice of several
            totals = dict(zip((n for n, _ in OVERLAY_ENTRIES), (self.stats.nan, self.stats.posinf, self.stats.neginf)))
        self.heatmap.set_values(values, levels, totals)
        if self.current is not None and self.current.reference is not None:
            self._compare()

    def _heatmap_clicked(self, r: int, c: int) -> None:
        self.table.setCurrentIndex(self.table_model.index(r, c))

    def _hovered(self, r: int, c: int, value) -> None:
        text = str(value) if np.asarray(value).dtype.kind in "iub" else f"{float(value):.7g}"
        name = nonfinite_name(value)
        if name:
            text = name
        self.hover.setText(f"[{r}, {c}] = {text}")

    def _apply_type(self) -> None:
        if self.current is None:
            return
        text = self.type_edit.text().split(",")[0].strip()  # "64x16xi4, unpacked from its 512 bytes": its type
        if self.current.element and text == self.current.type_text.split(",")[0].strip():
            self._show_typed(self.current.array, self.current.type_text)  # back to the type it came with
            return
        try:
            wanted = TensorType.parse(text)
        except ValueError as e:
            data = np.asarray(self.current.array)
            values = unpacked_values(data, text) if data.dtype == np.uint8 else None  # bytes read as i4, ui2...
            packed = packed_type(text)
            if values is None and packed is not None and data.dtype == np.uint8:
                needs = packed[1].packed_byte_count(int(np.prod(packed[0], dtype=np.int64)))
                self.type_error.setText(f"{text} needs {needs} bytes; the tensor has {data.nbytes}")
                return
            if values is None:
                self.type_error.setText(str(e))
                return
            self._show_typed(values, f"{text}, unpacked from its {data.nbytes} bytes")
            return
        typed, got = view_bytes(np.asarray(self.current.array), wanted)
        if got.source == "raw":
            self.type_error.setText(
                f"{wanted} needs {wanted.byte_length} bytes; the tensor has {np.asarray(self.current.array).nbytes}"
            )
            return
        self._show_typed(typed, str(got))

    def _show_typed(self, array: np.ndarray, type_text: str) -> None:
        self.type_error.setText("")
        self.array = array
        item = self.tensor_list.currentItem()
        if item is not None:
            item.setText(list_item_text(self.current.list_label or self.current.label, type_text, self.current.list_state))
        self._show_array()

    # -- comparing

    def _pick_golden(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Golden data", "", "NumPy (*.npy *.npz)")
        if path:
            self.load_golden(path)

    def _compare(self) -> None:
        ref = self.current.reference if self.current is not None else None
        if ref is None:
            self.comparison = None
            self.compare_summary.setText("No reference: load golden data or open another run.")
            self._fit_compare_summary()
            return
        a = self.array
        ref = np.asarray(ref)
        if ref.size == a.size and ref.shape != a.shape:
            ref = ref.reshape(a.shape)
        self.comparison = c = compare(a, ref, tolerance=self._tolerance())
        if not c.shape_matches:
            self.compare_summary.setText(f"Cannot compare: {c.note}")
            self._fit_compare_summary()
            return
        self.compare_summary.setText(comparison_text(c))
        self._fit_compare_summary()
        self.compare_summary.setStyleSheet(f"color: {verdict_colour(str(c.verdict)).name()}")
        errors = error_map(a, ref)
        self.error_heatmap.set_values(self.current_plane(errors))


    def _tolerance(self) -> Tolerance:
        """All zero: the rounding rule; otherwise the values set (a zero among set ones counts as 0)."""
        atol, rtol, ulps = self.atol.value(), self.rtol.value(), self.ulps.value()
        if not (atol or rtol or ulps):
            return Tolerance()
        return Tolerance(atol, rtol, float(ulps) if ulps else None)


def comparison_text(c: Comparison) -> str:
    """The verdict, then the metrics users know, one group a line."""
    if c.ok:
        head = f"match: {c.verdict.label}"
    else:
        head = f"diverged: {c.mismatches} of {c.count} elements differ"
        if c.first_mismatch is not None:
            head += f", first at {list(c.first_mismatch)}"
    lines = [head, f"rule: {c.tolerance_text}", f"max abs error {c.max_abs_error:.6g}, max rel error {c.max_rel_error:.6g} (floored at the RMS {c.rms:.3g})"]
    if c.max_ulps is not None:
        lines.append(
            f"error vs scale {c.max_scaled_error:.3g} (scale {c.scale:.3g}), max {c.max_ulps:.0f} ulps, "
            f"SQNR {c.sqnr_db:.1f} dB, cosine {c.cosine:.9f}"
        )
        lines.append(
            f"NaN {c.nan_actual}/{c.nan_expected}, Inf {c.inf_actual}/{c.inf_expected} (this/reference)"
            + (f", {c.nonfinite_mismatches} disagree" if c.nonfinite_mismatches else ", agree")
        )
    return "\n".join(lines)


def list_item_text(label: str, type_text: str, state: str = "") -> str:
    """A tensor's list item: its binding label, then its type (and ``state``: "4x8xf32, not written yet"), then
    the label's note (after an em dash: "1024 bytes never written before this dispatch: undefined"), each on a
    line of its own (wrapped when long)."""
    binding, _, note = label.partition(" — ")
    kind = f"{type_text}, {state}" if state else type_text
    return "\n".join([binding, kind, *([note] if note else [])])


def _type_text(array: np.ndarray) -> str:
    return "x".join([*(str(d) for d in array.shape), element_name(array.dtype)])
