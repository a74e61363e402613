"""The dispatch list of a run (ordinal, name, workgroups, tensor health), from a capture bundle or a live
capture, with the tensor inspector for the picked dispatch.

Dropping a bundle (its directory, ``manifest.json`` or a ``.zip``) on the view, or opening one, reopens
all of it: dispatches, their tensors, and the dependency graph (exported as DOT).
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.views.tensor_inspector import InspectedTensor, TensorInspector
from engine.dispatch.bundle import Bundle, BundleError, DispatchEntry
from engine.dispatch.graph import dependency_graph
from engine.errors import LensError

COLUMNS = ("#", "Dispatch", "Workgroups", "Inputs", "Outputs", "Health")
_ROOT = QModelIndex()  # the invalid parent of a flat table


class DispatchRunModel(QAbstractTableModel):
    """Dispatch entries as rows; appending keeps the view live during a capture."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.entries: list[DispatchEntry] = []

    def set_entries(self, entries: list[DispatchEntry]) -> None:
        self.beginResetModel()
        self.entries = list(entries)
        self.endResetModel()

    def append(self, entry: DispatchEntry) -> None:
        n = len(self.entries)
        self.beginInsertRows(QModelIndex(), n, n)
        self.entries.append(entry)
        self.endInsertRows()

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt's name)
        return 0 if parent.isValid() else len(self.entries)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        e = self.entries[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return str(e.ordinal)
            if col == 1:
                return e.name
            if col == 2:
                return "x".join(str(w) for w in e.workgroups) if e.workgroups else "-"
            if col == 3:
                return " ".join(e.input_types) or "-"
            if col == 4:
                return " ".join(e.output_types) or "-"
            return e.health
        if role == Qt.ItemDataRole.ForegroundRole and col == 5 and e.health not in ("ok", "-"):
            return QBrush(QColor(200, 30, 30))
        if role == Qt.ItemDataRole.ToolTipRole and col == 1:
            return f"executable {e.executable}; tensors from {e.tensors_from}"
        return None


class LiveCapture(QObject):
    """A debug-engine capture on a worker thread; each dispatch arrives as a queued signal on the GUI."""

    dispatched = Signal(object)  # DispatchEntry
    finished = Signal(str)  # the bundle directory
    failed = Signal(str)

    def __init__(
        self,
        module: str,
        function: str,
        inputs: list[str],
        out: str,
        device: str = "local-sync",
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.args = (module, function, inputs, out, device)
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="lens-live-capture", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from engine.dispatch.capture import capture_debug

        module, function, inputs, out, device = self.args
        try:
            capture_debug(module, function, inputs, out, device=device, on_dispatch=self.dispatched.emit)
        except LensError as e:
            self.failed.emit(str(e))
            return
        self.finished.emit(str(out))


class DispatchRunView(QWidget):
    """The run's dispatches over the tensor inspector of the picked one."""

    dispatchSelected = Signal(object)  # noqa: N815 (Qt signal naming) - the DispatchEntry

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.bundle: Bundle | None = None
        self.reference: Bundle | None = None
        self.live: LiveCapture | None = None
        self.setAcceptDrops(True)
        self.title = QLabel("Open or drop a capture bundle (iree-lens capture --out=DIR).", self)
        self.title.setWordWrap(True)
        self.open_button = QPushButton("Open bundle…", self)
        self.open_button.clicked.connect(self._pick_bundle)
        self.compare_button = QPushButton("Compare with bundle…", self)
        self.compare_button.clicked.connect(self._pick_reference)
        self.dot_button = QPushButton("Export graph (DOT)…", self)
        self.dot_button.clicked.connect(self._export_dot)
        self.model = DispatchRunModel(self)
        # A filter by name (substring, case-insensitive) or #ordinal over every dispatch of the bundle.
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(-1)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setObjectName("bundleDispatchFilter")
        self.filter_edit.setPlaceholderText("Filter dispatches by name (conv, softmax…) or ordinal")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)  # more rows in view
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)  # IREE's long export names get the room
        for column in (2, 3, 4, 5):  # types can be long: a fixed start width, never squeezing the names
            header.resizeSection(column, 110)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # keeps the _dispatch_N and the shape
        self.table.selectionModel().currentRowChanged.connect(
            lambda cur, _prev: self.show_row(self.proxy.mapToSource(cur).row())
        )
        self.inspector = TensorInspector(self)

        bar = QHBoxLayout()
        bar.addWidget(self.title, 1)
        bar.addWidget(self.open_button)
        bar.addWidget(self.compare_button)
        bar.addWidget(self.dot_button)
        listing = QWidget(self)
        ll = QVBoxLayout(listing)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.filter_edit)
        ll.addWidget(self.table, 1)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(listing)
        splitter.addWidget(self.inspector)
        splitter.setSizes([360, 420])
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(splitter, 1)

    # -- feeding

    def open_bundle(self, path: str | Path) -> bool:
        """Show a capture bundle; a bad one is reported in the title (never raised)."""
        try:
            bundle = Bundle(path)
        except BundleError as e:
            self.title.setText(f"Cannot open {path}: {e}")
            return False
        self.bundle = bundle
        m = bundle.manifest
        self.title.setText(
            f"{Path(bundle.module).name} @{bundle.function} — {len(bundle.dispatches)} dispatches "
            f"({m.get('engine', '?')} engine, {m.get('device', '?')})"
        )
        self.model.set_entries(bundle.dispatches)
        if bundle.dispatches:
            self.table.selectRow(0)
        return True

    def add_live_dispatch(self, entry: DispatchEntry) -> None:
        """A dispatch captured by a run in progress (call on the GUI thread)."""
        self.model.append(entry)
        self.title.setText(f"Capturing… {len(self.model.entries)} dispatches")

    def capture_live(
        self, module: str, function: str, inputs: list[str], out: str, device: str = "local-sync"
    ) -> LiveCapture:
        """Run ``function`` on the debug engine, listing dispatches as they run; reopens the bundle after."""
        self.bundle = Bundle.in_progress(out, module, function)
        self.model.set_entries([])
        self.live = LiveCapture(module, function, inputs, out, device, self)
        self.live.dispatched.connect(self.add_live_dispatch)
        self.live.finished.connect(self.open_bundle)
        self.live.failed.connect(lambda message: self.title.setText(f"Capture failed: {message}"))
        self.live.start()
        return self.live

    def set_reference(self, path: str | Path) -> bool:
        """Another run's bundle: each dispatch's tensors are compared with the same ordinal's there."""
        try:
            self.reference = Bundle(path)
        except BundleError as e:
            self.title.setText(f"Cannot open {path}: {e}")
            return False
        row = self.proxy.mapToSource(self.table.currentIndex()).row()
        if row >= 0:
            self.show_row(row)
        return True

    def show_row(self, row: int) -> None:
        if self.bundle is None or not 0 <= row < len(self.model.entries):
            return
        entry = self.model.entries[row]
        tensors = []
        for which in ("inputs", "outputs"):
            try:
                arrays = self.bundle.dispatch_tensors(entry, which)
            except BundleError as e:
                self.title.setText(f"Dispatch {entry.ordinal}: {e}")
                return
            types = entry.input_types if which == "inputs" else entry.output_types
            refs = self._reference_tensors(entry, which)
            for i, a in enumerate(arrays):
                label = f"{which[:-1]} {i}"
                ref = refs[i] if refs is not None and i < len(refs) else None
                tensors.append(InspectedTensor(label, a, types[i] if i < len(types) else "", ref))
        self.inspector.set_tensors(tensors)
        self.dispatchSelected.emit(entry)

    def _reference_tensors(self, entry: DispatchEntry, which: str):
        if self.reference is None:
            return None
        same = [d for d in self.reference.dispatches if d.ordinal == entry.ordinal and d.name == entry.name]
        return self.reference.dispatch_tensors(same[0], which) if same else None

    def dot(self) -> str:
        return dependency_graph(self.model.entries).to_dot()

    # -- user actions

    def _pick_bundle(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Capture bundle")
        if path:
            self.open_bundle(path)

    def _pick_reference(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Bundle to compare with")
        if path:
            self.set_reference(path)

    def _export_dot(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Dependency graph", "dispatches.dot", "DOT (*.dot)")
        if path:
            Path(path).write_text(self.dot())

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            if url.isLocalFile() and self.open_bundle(url.toLocalFile()):
                event.acceptProposedAction()
                return


def is_bundle(path: str | Path) -> bool:
    """Whether ``path`` is a capture bundle (a directory with manifest.json, the manifest, or a .zip)."""
    p = Path(path)
    return (p.is_dir() and (p / "manifest.json").is_file()) or p.name == "manifest.json" or p.suffix == ".zip"


def open_bundle_document(open_document, path: str | Path) -> DispatchRunView | None:
    """Open a capture bundle as a document of the main window (``MainWindow.open_document`` or
    ``PanelServices.open_document``); one tab per bundle, reused when it is open already. None (and no
    tab) when ``path`` is not a bundle."""
    view = DispatchRunView()
    if not view.open_bundle(path):
        view.deleteLater()
        return None
    key = f"capture:{Path(view.bundle.directory).resolve()}"
    return open_document(view, f"Capture {Path(view.bundle.directory).name}", key)
