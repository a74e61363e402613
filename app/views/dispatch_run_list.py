"""The dispatch list of a run (ordinal, name, workgroups, tensor health), from a capture bundle or a live
capture, with the tensor inspector for the picked dispatch. **Compare with bundle…** judges every dispatch
against another run's capture (``engine.dispatch.compare``: numerics' verdicts, on a worker thread) and
colours the rows by verdict, with a Verdict column, tooltips and a legend (``dispatch_list_model``); the
inspector's Compare tab shows the picked tensor's metrics against the reference's.

Dropping a bundle (its directory, ``manifest.json`` or a ``.zip``) on the view, or opening one, reopens
all of it: dispatches, their tensors, and the dependency graph (exported as DOT).
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np
from PySide6.QtCore import QModelIndex, QObject, Qt, Signal
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

from app.views.dispatch_list_model import (
    ColumnFitter,
    DispatchListModel,
    FilterTyping,
    NameFilter,
    VerdictMark,
)
from app.views.tensor_inspector import InspectedTensor, TensorInspector
from app.views.verdict_style import legend_html
from engine.dispatch.bundle import Bundle, BundleError, DispatchEntry
from engine.dispatch.compare import bundle_sources, bundle_verdicts, comparable_tensors, read_bytes_as
from engine.dispatch.graph import dependency_graph
from engine.errors import LensError

HEALTH_BAD = QBrush(QColor(200, 30, 30))


class DispatchRunModel(DispatchListModel):
    """Dispatch entries as rows; appending keeps the view live during a capture. Compared with another run,
    each row carries its verdict (``dispatch_list_model``)."""

    columns = ("#", "Dispatch", "Workgroups", "Inputs", "Outputs", "Health")

    @property
    def entries(self) -> list[DispatchEntry]:
        return self.rows

    def set_entries(self, entries: list[DispatchEntry]) -> None:
        self.beginResetModel()
        self.rows = list(entries)
        self.endResetModel()

    def append(self, entry: DispatchEntry) -> None:
        n = len(self.rows)
        self.beginInsertRows(QModelIndex(), n, n)
        self.rows.append(entry)
        self.endInsertRows()

    def ordinal_of(self, row: DispatchEntry) -> int:
        return row.ordinal

    def name_of(self, row: DispatchEntry) -> str:
        return row.name

    def cell(self, e: DispatchEntry, column: int) -> str:
        if column == 2:
            return "x".join(str(w) for w in e.workgroups) if e.workgroups else "-"
        if column == 3:
            return " ".join(e.input_types) or "-"
        if column == 4:
            return " ".join(e.output_types) or "-"
        if column == 5:
            return e.health
        return super().cell(e, column)

    def foreground_of(self, e: DispatchEntry, column: int) -> QBrush | None:
        return HEALTH_BAD if column == 5 and e.health not in ("ok", "-") else None

    def tooltip_of(self, e: DispatchEntry) -> str:
        return f"#{e.ordinal} {e.name}: executable {e.executable}; tensors from {e.tensors_from}"


class VerdictJob(QObject):
    """Every dispatch of a capture judged against another run's (``engine.dispatch.compare``) on a worker
    thread; the verdicts arrive as a queued signal on the GUI thread."""

    done = Signal(object)  # dict[int, DispatchVerdict]
    failed = Signal(str)

    def __init__(self, bundle: Bundle, reference: Bundle, parent: QObject | None = None):
        super().__init__(parent)
        self.bundle, self.reference = bundle, reference
        self.cancel = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lens-bundle-verdicts", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            found = bundle_verdicts(self.bundle, self.reference, cancelled=self.cancel.is_set)
        except (LensError, OSError, ValueError) as e:
            self.failed.emit(str(e))
            return
        if not self.cancel.is_set():
            self.done.emit(found)


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
        from engine.dispatch.rebuild_sources import found_or_rebuilt

        module, function, inputs, out, device = self.args
        try:
            # Typed as the debugger types them: sources beside the module, else the checked rebuild (cached).
            sources = found_or_rebuilt(module)
            capture_debug(module, function, inputs, out, device=device, sources=sources, on_dispatch=self.dispatched.emit)
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
        # A filter by name (substring, case-insensitive, or a glob) or #ordinal over every dispatch of the bundle.
        self.proxy = NameFilter(self)
        self.proxy.setSourceModel(self.model)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setObjectName("bundleDispatchFilter")
        self.filter_edit.setPlaceholderText("Filter dispatches by name (conv, softmax…) or ordinal")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_typing = FilterTyping(self.filter_edit, self.proxy, self)
        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)  # more rows in view
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)  # IREE's long export names get the room
        self.fitter = ColumnFitter(self.table, self.model, only=(0,))  # the ordinal, #1000 and up in full
        for column in (2, 3, 4, 5):  # types can be long: a fixed start width, never squeezing the names
            header.resizeSection(column, 110)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # keeps the _dispatch_N and the shape
        self.table.selectionModel().currentRowChanged.connect(
            lambda cur, _prev: self.show_row(self.proxy.mapToSource(cur).row())
        )
        self.inspector = TensorInspector(self)
        # What the row colours mean once compared with another run: never colour alone.
        self.legend = QLabel(legend_html(inherited=True), self)
        self.legend.setObjectName("bundleDispatchLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setVisible(False)
        self.verdict_job: VerdictJob | None = None
        self._sources: dict[int, tuple] = {}  # (this capture's, the reference's) executable sources
        self.read_as: dict[int, str] = {}  # ordinal -> element type its untyped bytes were compared as

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
        ll.addWidget(self.legend)
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
        self._sources = {}
        m = bundle.manifest
        self.title.setText(
            f"{Path(bundle.module).name} @{bundle.function} — {len(bundle.dispatches)} dispatches "
            f"({m.get('engine', '?')} engine, {m.get('device', '?')})"
        )
        self.model.set_entries(bundle.dispatches)
        self.model.set_source_lines(_source_lines(bundle.module))  # verdicts read by source line too
        self._set_verdicts({})
        if self.reference is not None:
            self._judge()
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
            self._sources = {}
        except BundleError as e:
            self.title.setText(f"Cannot open {path}: {e}")
            return False
        row = self.proxy.mapToSource(self.table.currentIndex()).row()
        if row >= 0:
            self.show_row(row)
        self._judge()
        return True

    def _judge(self) -> None:
        """Judge every dispatch against the reference (a worker thread), then colour the rows."""
        if self.verdict_job is not None:
            self.verdict_job.cancel.set()
        if self.bundle is None or self.reference is None or not self.model.rows:
            return
        self._set_verdicts({})
        self.verdict_job = job = VerdictJob(self.bundle, self.reference, self)
        job.done.connect(lambda found: self._on_verdicts(job, found))
        job.failed.connect(lambda message: self.title.setText(f"Comparing with the reference failed: {message}"))
        job.start()

    def _on_verdicts(self, job: VerdictJob, found: dict) -> None:
        if job is not self.verdict_job:
            return  # an older comparison
        self.verdict_job = None
        job.deleteLater()
        marks = {o: VerdictMark(str(v.verdict), v.summary, v.inherited) for o, v in found.items()}
        self.read_as = {o: v.read_as for o, v in found.items() if v.read_as}
        self._set_verdicts(marks)
        row = self.proxy.mapToSource(self.table.currentIndex()).row()
        if row >= 0 and self.read_as:
            self.show_row(row)  # its tensors as the comparison read them
        diverged = sorted(o for o, m in marks.items() if m.verdict == "diverged" and not m.inherited)
        counts = Counter(m.label for m in marks.values())
        text = ", ".join(f"{n} {label}" for label, n in counts.items())
        where = f"; first diverged with agreeing inputs: #{diverged[0]}" if diverged else ""
        self.title.setText(f"Compared with {Path(self.reference.directory).name}: {text}{where}")

    def _set_verdicts(self, verdicts: dict[int, VerdictMark]) -> None:
        if not verdicts:
            self.read_as = {}
        self.model.set_verdicts(verdicts)
        self.legend.setVisible(bool(verdicts))

    def show_row(self, row: int) -> None:
        if self.bundle is None or not 0 <= row < len(self.model.entries):
            return
        entry = self.model.entries[row]
        try:
            own, reference = self._row_tensors(entry)
        except BundleError as e:
            self.title.setText(f"Dispatch {entry.ordinal}: {e}")
            return
        tensors = []
        for k, which in enumerate(("inputs", "outputs")):
            types = entry.input_types if which == "inputs" else entry.output_types
            refs = reference[k] if reference is not None else None
            for i, a in enumerate(own[k]):
                label = f"{which[:-1]} {i}"
                ref = refs[i] if refs is not None and i < len(refs) else None
                # The capture's type text, unless the tensors were typed anew to pair with the reference's.
                typed = entry.tensors_from != "bindings"
                stored = len(own[k]) == len(types) and (typed or a.dtype == np.uint8)
                type_text = types[i] if stored and i < len(types) else ""
                if not typed and a.dtype != np.uint8 and entry.ordinal in self.read_as:
                    label += f" (bytes read as {self.read_as[entry.ordinal]}, as the comparison reads them)"
                tensors.append(InspectedTensor(label, a, type_text, ref))
        self.inspector.set_tensors(tensors)
        self.dispatchSelected.emit(entry)

    def _row_tensors(self, entry: DispatchEntry) -> tuple[tuple[list, list], tuple[list, list] | None]:
        """This dispatch's (inputs, outputs) and the reference's; where only one of the two captures is typed,
        the other is typed by its sources (``engine.dispatch.compare.comparable_tensors``) so they pair."""
        bundle, reference = self.bundle, self.reference
        same = [d for d in reference.dispatches if d.ordinal == entry.ordinal and d.name == entry.name] if reference else []
        if not same:
            return (bundle.dispatch_tensors(entry, "inputs"), bundle.dispatch_tensors(entry, "outputs")), None
        sources = self._sources.get(id(reference))
        if sources is None:
            sources = self._sources[id(reference)] = (bundle_sources(bundle), bundle_sources(reference))
        own = comparable_tensors(bundle, entry, same[0], sources[1])
        theirs = comparable_tensors(reference, same[0], entry, sources[0])
        read_as = self.read_as.get(entry.ordinal)
        if read_as is not None:  # untyped bytes: shown and compared as the verdict read them
            own = tuple(read_bytes_as(list(x), read_as) for x in own)
            theirs = tuple(read_bytes_as(list(x), read_as) for x in theirs)
        return own, theirs

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


def _source_lines(module: str) -> dict[str, str]:
    """The captured module's export -> source line, where the module is still readable here."""
    from app.views.dispatch_list_model import source_lines_job

    if not module or not Path(module).is_file():
        return {}
    try:
        return source_lines_job(module)
    except Exception:  # noqa: BLE001 - a location is a courtesy: never fail the list for it
        return {}
