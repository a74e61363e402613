"""The dispatches of the window's debug run, live: a list (ordinal, name, workgroups, tensor health) that
fills as the run reports dispatches, and, when the run stops at a dispatch (a dispatch breakpoint, NaN,
Next Dispatch), a document "Dispatch #N name" with the tensor inspector on its inputs and outputs.

Everything comes through the window's one ``SessionBridge``: ``dispatchStopped`` asks for the bindings'
bytes (``request_bindings``), ``bindingsRead`` types them (``engine.dispatch.paused_types``: the current
compilation's executable sources, the module's SPIR-V, IREE's dispatch name, else raw bytes) and shows
them. The bridge reports running dispatches at most every ``PROGRESS_INTERVAL``, so a fast run lists the
dispatches it was seen running and every one it stopped at, not necessarily all of them.
"""

from __future__ import annotations

from pathlib import Path

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView, QLabel, QTableView, QTabWidget, QVBoxLayout, QWidget

from app.views.dispatch_run_list import DispatchRunModel
from app.views.tensor_inspector import InspectedTensor, TensorInspector
from engine.dispatch.bundle import DispatchEntry
from engine.dispatch.debug_capture import health_of
from engine.dispatch.paused_types import TypedBinding, typed_bindings
from engine.dispatch.spirv_types import module_binding_elements
from engine.dispatch.tensor_types import interfaces_from_files
from engine.errors import LensError

UNREAD = "-"  # health of a dispatch whose tensors were not read (seen running, not stopped at)


class PausedDispatchView(QWidget):
    """One paused dispatch: a header (ordinal, names, workgroups, where the types came from) over the
    tensor inspector of its inputs and outputs."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.info = None
        self.tensors: list[TypedBinding] = []
        self.header = QLabel(self)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.inspector = TensorInspector(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.inspector, 1)

    def show_dispatch(self, info, tensors: list[TypedBinding], note: str = "") -> None:
        self.info, self.tensors = info, tensors
        wg = "x".join(str(w) for w in info.workgroup_count)
        sources = sorted({t.type.source for t in tensors})
        self.header.setText(
            f"Dispatch #{info.ordinal} {info.export} ({info.when} it runs) — executable {info.executable}, "
            f"workgroups {wg}, {len(info.bindings)} bindings; types from {', '.join(sources) or '-'}"
            + (f". {note}" if note else "")
        )
        self.inspector.set_tensors(
            [InspectedTensor(f"{t.label} (binding {t.binding})", t.array, str(t.type)) for t in tensors]
        )


class RunDispatchesPanel(QWidget):
    """The run's dispatch list (a document panel); owns the paused-dispatch documents it opens."""

    def __init__(self, services, parent: QWidget | None = None):
        super().__init__(parent)
        self.services = services
        self.bridge = getattr(services, "session_bridge", None)
        self.title = QLabel("Run a function in the VM Stepper: its dispatches are listed here as they run.", self)
        self.title.setWordWrap(True)
        self.model = DispatchRunModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        self.setMinimumSize(1, 1)
        self.paused_view: PausedDispatchView | None = None
        self._rows: dict[int, int] = {}  # ordinal -> row
        self._types_for: tuple | None = None  # (compilation out_dir, module path) the caches belong to
        self._interfaces: dict = {}
        self._spirv: dict = {}
        if self.bridge is not None:
            self.bridge.dispatchStopped.connect(self._on_dispatch_stopped)
            self.bridge.bindingsRead.connect(self._on_bindings)
            self.bridge.progressed.connect(self._on_progress)
            self.bridge.stateChanged.connect(self._on_state)
            self.bridge.finished.connect(lambda _e: self._set_title("finished"))
        self._last_state = None

    # -- the list

    def _on_state(self, state: str) -> None:
        # A new call (from idle) starts a new list; resuming from a stop keeps it.
        if state == "running" and self._last_state == "idle":
            self._rows.clear()
            self.model.set_entries([])
        self._last_state = state

    def _note(self, info, health: str | None = None) -> None:
        row = self._rows.get(info.ordinal)
        if row is None:
            entry = DispatchEntry(
                info.ordinal, info.export, info.executable, list(info.workgroup_count), health=health or UNREAD
            )
            self._rows[info.ordinal] = len(self.model.entries)
            self.model.append(entry)
        elif health is not None:
            self.model.entries[row].health = health
            index = self.model.index(row, 5)  # the Health column
            self.model.dataChanged.emit(index, index)
        self._set_title("running" if self.bridge is None or self.bridge.state == "running" else "paused")

    def _set_title(self, what: str) -> None:
        self.title.setText(f"{len(self.model.entries)} dispatches ({what})")

    def _on_progress(self, progress) -> None:
        info = progress.location.dispatch_info
        if info is not None:
            self._note(info)

    def _on_dispatch_stopped(self, info) -> None:
        self._note(info)
        self.bridge.request_bindings()

    # -- the paused dispatch

    def _type_sources(self) -> tuple[dict, dict]:
        """Interfaces from the current compilation's executable sources; SPIR-V types from the module."""
        context = self.services.context
        compilation = getattr(context, "compilation", None)
        out_dir = getattr(compilation, "out_dir", None) if compilation is not None else None
        module_path = getattr(self.bridge, "module_path", None)
        key = (str(out_dir), str(module_path))
        if key != self._types_for:
            self._types_for = key
            self._interfaces, self._spirv = {}, {}
            sources = Path(out_dir) / "executables" / "sources" if out_dir else None
            if sources is not None and sources.is_dir():
                try:
                    self._interfaces = interfaces_from_files([str(sources)])
                except LensError:
                    self._interfaces = {}
            if module_path:
                self._spirv = module_binding_elements(module_path)
        return self._interfaces, self._spirv

    def _on_bindings(self, info, arrays) -> None:
        if info is None:
            return
        interfaces, spirv = self._type_sources()
        accesses = [b.access for b in info.bindings]
        tensors = typed_bindings(
            info.export, list(arrays), accesses, info.constants, interfaces.get(info.export), spirv.get(info.export)
        )
        outputs = [t.array for t in tensors if t.role == "output"]
        self._note(info, health_of(outputs) if info.when == "after" else UNREAD)
        self.show_paused(info, tensors)

    def show_paused(self, info, tensors: list[TypedBinding]) -> PausedDispatchView:
        """Show the paused dispatch in its document (one tab, reused and renamed for each stop; a closed
        tab is deleted by the window, so each stop offers a fresh view and gets the open one back)."""
        title = f"Dispatch #{info.ordinal} {info.export}"
        view = self.paused_view
        tabs = _tab_widget(view) if view is not None and shiboken6.isValid(view) else None
        if tabs is not None and tabs.currentWidget() is not view:
            # Open but behind another document (the editor the user works in): update it, do not jump.
            view.show_dispatch(info, tensors)
            index = tabs.indexOf(view)
            tabs.setTabText(index, title)
            tabs.setTabToolTip(index, title)
            return view
        view = self.services.open_document(PausedDispatchView(), title, "paused-dispatch")
        view.show_dispatch(info, tensors)
        self.paused_view = view
        return view


def _tab_widget(widget: QWidget) -> QTabWidget | None:
    parent = widget.parent()
    while parent is not None and not isinstance(parent, QTabWidget):
        parent = parent.parent()
    return parent if parent is not None and parent.indexOf(widget) >= 0 else None


def run_dispatches_panel(services) -> RunDispatchesPanel:
    return RunDispatchesPanel(services)
