"""The main window: the module inspector in the middle, dockable panels around it, menus, status bar.

The window owns the shared services (current-position context, engine worker, message log) and
hands them to every panel; panels talk to each other only through the context.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from app.context import LensContext, LoadedModule
from app.documents import DocumentArea
from app.messages import Level, Message, MessageLog
from app.module_loader import OPENABLE_SUFFIXES, load_file
from app.panels import AREAS, PANELS, PanelServices, PanelSpec
from app.session_bridge import SessionBridge
from app.settings import LensSettings
from app.views.message_banner import MessageBanner
from app.views.module_view import ModuleView
from app.workers import EngineWorker, WorkError

APP_TITLE = "IREE Lens"
LOAD_TAG = "open-file"


class MainWindow(QMainWindow):
    def __init__(self, settings: LensSettings | None = None, panels: list[PanelSpec] | None = None):
        super().__init__()
        self.setObjectName("IreeLensMainWindow")
        self.setWindowTitle(APP_TITLE)
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.settings = settings if settings is not None else LensSettings()

        self.context = LensContext(self)
        self.messages = MessageLog(self)
        self.worker = EngineWorker(self)
        # Middle: the error banner over the document tabs (created first: panels may open documents).
        self.banner = MessageBanner()
        self.documents = DocumentArea(self)
        # One debug session for the whole window, handed to every panel.
        self.session_bridge = SessionBridge(self.context, parent=self)
        self.services = PanelServices(
            self.context,
            self.worker,
            self.messages,
            self.open_file,
            open_document=self.open_document,
            session_bridge=self.session_bridge,
        )
        self._loading: Path | None = None
        self.module_view = ModuleView(self.services)
        self.documents.open_document(self.module_view, "Module", key="module", closable=False)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.documents, 1)
        self.setCentralWidget(central)

        self.docks: dict[str, QDockWidget] = {}
        self.panels: dict[str, QWidget] = {}
        for spec in PANELS if panels is None else panels:
            self.add_panel(spec)

        self._build_menus()
        self._build_status_bar()

        self.messages.messageAdded.connect(self._on_message)
        self.worker.started.connect(lambda _: self._busy.setVisible(True))
        self.worker.idle.connect(lambda: self._busy.setVisible(False))
        self.worker.progressed.connect(lambda p: p.text and self.statusBar().showMessage(p.text, 5000))
        self.context.moduleChanged.connect(self._on_module_changed)

        self.resize(1400, 900)
        self._restore_layout()

    # -- panels --------------------------------------------------------------------------------

    def add_panel(self, spec: PanelSpec) -> QDockWidget:
        """Create the panel of ``spec`` in a dock (its objectName is ``dock-<id>`` for saved layouts)."""
        widget = spec.create(self.services)
        dock = QDockWidget(spec.title, self)
        dock.setObjectName(f"dock-{spec.id}")
        dock.setWidget(widget)
        self.addDockWidget(AREAS[spec.area], dock)
        if spec.tabify_with and spec.tabify_with in self.docks:
            self.tabifyDockWidget(self.docks[spec.tabify_with], dock)
        dock.setVisible(spec.visible)
        self.docks[spec.id] = dock
        self.panels[spec.id] = widget
        if hasattr(self, "_view_menu"):
            self._view_menu.addAction(dock.toggleViewAction())
        return dock

    def open_document(self, widget: QWidget, title: str, key: str | None = None) -> QWidget:
        """Show ``widget`` as a document tab (re-activating the open one with the same ``key``)."""
        return self.documents.open_document(widget, title, key)

    # -- menus and status bar ------------------------------------------------------------------

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = QAction("&Open...", self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self._open_dialog)
        file_menu.addAction(self.open_action)
        self.recent_menu = QMenu("Open &Recent", self)
        file_menu.addMenu(self.recent_menu)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        self._update_recent_menu()

        self._view_menu = self.menuBar().addMenu("&View")
        for dock in self.docks.values():
            self._view_menu.addAction(dock.toggleViewAction())

        help_menu = self.menuBar().addMenu("&Help")
        about = QAction("&About IREE Lens", self)
        about.triggered.connect(self._about)
        help_menu.addAction(about)

    def _build_status_bar(self) -> None:
        self.module_label = QLabel("No module")
        self._busy = QProgressBar()
        self._busy.setRange(0, 0)  # busy indicator: the engine worker is running something
        self._busy.setMaximumWidth(120)
        self._busy.setMaximumHeight(14)
        self._busy.setVisible(False)
        self.statusBar().addPermanentWidget(self._busy)
        self.statusBar().addPermanentWidget(self.module_label)
        self.statusBar().showMessage("Drop a .vmfb or .mlir file on the window, or use File > Open.")

    def _update_recent_menu(self) -> None:
        self.recent_menu.clear()
        files = self.settings.recent_files()
        for path in files:
            action = self.recent_menu.addAction(str(path))
            action.triggered.connect(lambda _=False, p=path: self.open_file(p))
        if files:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear", self._clear_recent)
        self.recent_menu.setEnabled(bool(files))

    def _clear_recent(self) -> None:
        self.settings.clear_recent_files()
        self._update_recent_menu()

    def _open_dialog(self) -> None:
        start = str(self.settings.recent_files()[0].parent) if self.settings.recent_files() else ""
        patterns = " ".join(f"*{s}" for s in OPENABLE_SUFFIXES)
        name, _ = QFileDialog.getOpenFileName(
            self, "Open module", start, f"IREE modules and sources ({patterns});;All files (*)"
        )
        if name:
            self.open_file(name)

    def _about(self) -> None:
        QMessageBox.about(
            self,
            "About IREE Lens",
            "<b>IREE Lens</b><br>A debugger and trace viewer for programs compiled by IREE 3.13.",
        )

    # -- opening files -------------------------------------------------------------------------

    def open_file(self, path: str | Path) -> int:
        """Start opening ``path`` on the engine worker; returns the request id.

        A newer open supersedes an older one still waiting. The result sets the context's module;
        an error shows in the banner and the log, and the current module stays.
        """
        path = Path(path)
        self._loading = path
        self.statusBar().showMessage(f"Opening {path.name}...")
        return self.worker.submit(
            load_file,
            path,
            tag=LOAD_TAG,
            on_result=self._on_loaded,
            on_error=lambda err, p=path: self._on_load_failed(p, err),
        )

    @property
    def is_loading(self) -> bool:
        return self._loading is not None

    def _on_loaded(self, loaded: LoadedModule) -> None:
        self._loading = None
        self.banner.hide()
        opened = loaded.source or loaded.path
        self.settings.add_recent_file(opened)
        self._update_recent_menu()
        self.context.set_module(loaded)
        self.messages.info(f"opened {opened}" + (f" (compiled to {loaded.path})" if loaded.source else ""))

    def _on_load_failed(self, path: Path, err: WorkError) -> None:
        self._loading = None
        self.messages.error(f"Cannot open {path.name}: {err.message}", err.details)

    def _on_module_changed(self, loaded: LoadedModule | None) -> None:
        if loaded is None:
            self.setWindowTitle(APP_TITLE)
            self.module_label.setText("No module")
            return
        shown = loaded.source or loaded.path
        self.setWindowTitle(f"{shown.name} — {APP_TITLE}")
        module = loaded.module
        name = getattr(module, "name", "?")
        n = len(getattr(module, "functions", []) or [])
        self.module_label.setText(f"@{name} · {n} functions · {loaded.path.stat().st_size:,} bytes")
        self.statusBar().showMessage(f"Opened {shown}", 5000)

    def _on_message(self, msg: Message) -> None:
        if msg.level in (Level.ERROR, Level.WARNING):
            self.banner.show_message(msg)
            self.statusBar().showMessage(msg.text, 10000)

    # -- drag and drop -------------------------------------------------------------------------

    @staticmethod
    def _dropped_files(event: QDragEnterEvent | QDropEvent) -> list[Path]:
        mime = event.mimeData()
        if mime is None or not mime.hasUrls():
            return []
        urls: list[QUrl] = mime.urls()
        return [Path(u.toLocalFile()) for u in urls if u.isLocalFile()]

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._dropped_files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: ANN001 - QDragMoveEvent
        if self._dropped_files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        files = self._dropped_files(event)
        if not files:
            event.ignore()
            return
        event.acceptProposedAction()
        # One module at a time: the first file wins; say so when several were dropped.
        if len(files) > 1:
            self.messages.info(f"{len(files)} files dropped; opening {files[0].name}")
        self.open_file(files[0])

    # -- layout persistence --------------------------------------------------------------------

    def _restore_layout(self) -> None:
        geometry, state = self.settings.window_layout()
        if geometry is not None:
            self.restoreGeometry(geometry)
        self._needs_default_layout = state is None or not self.restoreState(state)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._needs_default_layout:
            self._needs_default_layout = False
            # Dock sizes apply once the window has its real size, i.e. after the first show.
            QTimer.singleShot(0, self._default_layout)

    def _default_layout(self) -> None:
        # The module inspector keeps most of the room: side panels about a third of the width,
        # bottom panels a few lines of text.
        for area, size, orientation in (
            (Qt.DockWidgetArea.BottomDockWidgetArea, 130, Qt.Orientation.Vertical),
            (Qt.DockWidgetArea.RightDockWidgetArea, int(self.width() * 0.34), Qt.Orientation.Horizontal),
            (Qt.DockWidgetArea.LeftDockWidgetArea, int(self.width() * 0.25), Qt.Orientation.Horizontal),
        ):
            docks = [d for d in self.docks.values() if self.dockWidgetArea(d) == area and not d.isFloating()]
            if docks:
                self.resizeDocks(docks, [size] * len(docks), orientation)

    def save_layout(self) -> None:
        self.settings.save_window_layout(QByteArray(self.saveGeometry()), QByteArray(self.saveState()))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_layout()
        self.worker.shutdown(timeout=2.0)
        super().closeEvent(event)
