"""The main window, laid out like a debugger: documents in the middle, small panels docked around them.

The centre is document tabs (:class:`~app.documents.DocumentArea`): the start page, the module
inspector (a function's disassembly, a segment's bytes, an executable), the compile panel, and the
phase timeline and IR of each compilation. Around it, docks that are small by nature: the module tree
and the devices on the left, the VM stepper (disassembly, registers, call stack, breakpoints) on the
right, the log and the dispatch list at the bottom. A toolbar holds the main actions and shortcuts.

The window owns the shared services (current-position context, engine worker, message log) and
hands them to every panel; panels talk to each other only through the context.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QKeySequence,
    QShowEvent,
)
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
from app.documents import KEY_PROPERTY, DocumentArea
from app.messages import Level, Message, MessageLog
from app.module_loader import OPENABLE_SUFFIXES, load_file
from app.panels import AREAS, PANELS, PanelServices, PanelSpec
from app.session_bridge import SessionBridge
from app.settings import LensSettings
from app.views.device_mismatch_bar import DeviceMismatchBar
from app.views.dispatch_run_list import is_bundle, open_bundle_document
from app.views.message_banner import MessageBanner
from app.views.module_view import ModuleView
from app.views.start_page import StartPage
from app.workbench import Workbench, WorkbenchState
from app.workers import EngineWorker, WorkError, WorkProgress
from engine.session.protocol import Tensors

APP_TITLE = "IREE Lens"
LOAD_TAG = "open-file"
NUMPY_SUFFIXES = (".npy", ".npz")
# Chrome trace-event JSON (Perfetto, PyTorch's profiler), IREE's HAL profiles, compile timing, our own.
TRACE_SUFFIXES = (".json", ".jsonl", ".ireeprof", ".lenstrace")
START_KEY = "start"
KEEP_ALIVE = "lensKeepAlive"  # app.documents.KEEP_ALIVE_PROPERTY: closing the tab hides the widget
# The default layout, as fractions of the window (with a floor in pixels): docks small, documents the rest.
LEFT_FRACTION, LEFT_MIN = 0.17, 200
RIGHT_FRACTION, RIGHT_MIN = 0.38, 330
# The log and the run dispatch list share it: a tab bar, the dock's title, the list's one row of controls, then
# five or six rows of dispatches at 1366x768 (175 px showed three), eight at 1920x1080.
BOTTOM_FRACTION, BOTTOM_MIN = 0.24, 210


def load_error_details(err: WorkError) -> str:
    """What the log shows under a file that did not open: a compile error's diagnostics (every one, the message
    names only the first), nothing more for another typed error (its message names the problem), and the
    traceback of anything else (a bug). A broken .mlir showed the loader's Python traceback."""
    from engine.errors import CompileError, LensError

    if isinstance(err.exception, CompileError):
        return "\n".join(str(d) for d in err.exception.diagnostics)
    if isinstance(err.exception, LensError):
        return ""
    return err.details


class MainWindow(QMainWindow):
    def __init__(self, settings: LensSettings | None = None, panels: list[PanelSpec] | None = None):
        super().__init__()
        self.setObjectName("IreeLensMainWindow")
        self.setWindowTitle(APP_TITLE)
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        # Side docks run the full height; the bottom docks (log, dispatches) sit under the documents only.
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.settings = settings if settings is not None else LensSettings()

        self.context = LensContext(self)
        self.messages = MessageLog(self)
        self.worker = EngineWorker(self)
        # Middle: the error banner over the document tabs (created first: panels may open documents).
        self.banner = MessageBanner()
        self.documents = DocumentArea(self)
        # One debug session for the whole window, handed to every panel.
        self.session_bridge = SessionBridge(self.context, parent=self)
        # The one current state (module, device, function, inputs, run, paused dispatch) every view reads.
        self.workbench = Workbench(self.context, self.session_bridge, parent=self)
        self.workbench.devices = self.known_devices
        self.mismatch_bar = DeviceMismatchBar(self.switch_to_matching_device, self.recompile_for_device)
        self.services = PanelServices(
            self.context,
            self.worker,
            self.messages,
            self.open_file,
            open_document=self.open_document,
            session_bridge=self.session_bridge,
            workbench=self.workbench,
        )
        self._loading: Path | None = None
        self._shown_run = 0  # the run (Workbench.state.run) the documents show
        self.start_page = StartPage(self.open_file, self._open_dialog)
        self.start_page.setProperty(KEEP_ALIVE, True)
        self.documents.open_document(self.start_page, "Start", key=START_KEY)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.mismatch_bar)
        layout.addWidget(self.documents, 1)
        self.setCentralWidget(central)

        self.docks: dict[str, QDockWidget] = {}
        self.panels: dict[str, QWidget] = {}
        self._document_panels: dict[str, tuple[QWidget, str]] = {}
        # The module tree is a narrow dock; what a node shows opens as the inspector document.
        self.module_view = ModuleView(self.services, details_as_document=True)
        self._add_dock("module", "Module", self.module_view, "left")
        for spec in PANELS if panels is None else panels:
            self.add_panel(spec)
        if "compile" in self.panels:  # a compile from the panel (or the toolbar) opens its phases too
            self.panels["compile"].compilationFinished.connect(
                lambda c: c.ok and c.phases and self.open_compilation(c, c.source_path)
            )
        self.run_inputs = None
        if "stepper" in self.panels:
            from app.run_inputs import RunInputs

            self.run_inputs = RunInputs(self.workbench, self.context, self.settings.store, parent=self)

        self._build_menus()
        self._build_toolbar()
        self._build_status_bar()

        self.messages.messageAdded.connect(self._on_message)
        self.messages.messageRetired.connect(self.banner.retire)
        self.worker.started.connect(lambda _: self._show_busy())
        self.worker.idle.connect(self._hide_busy)
        self.worker.progressed.connect(self._on_progress)
        self.context.moduleChanged.connect(self._on_module_changed)
        self.workbench.said.connect(self._say)
        self.workbench.stateChanged.connect(self._on_workbench)
        self.workbench.moduleReset.connect(self._on_module_reset)
        # A stop at a dispatch comes to the front once its tensors are shown (the paused dispatch's document
        # opens when they arrive; the module inspector may have moved to the stop's function meanwhile).
        self.session_bridge.answered.connect(self._on_answer)
        # A new call: the previous run's error banner is history.
        self.session_bridge.callChanged.connect(lambda _call: self.banner.hide())
        # A module fetched from the remote side opens like a local one (the session runs the remote file).
        self._remote_fetch: str | None = None
        self.session_bridge.remoteModuleFetched.connect(self._on_remote_module)
        self.session_bridge.failed.connect(self._on_remote_fetch_failed)
        self.documents.setCurrentWidget(self.start_page)
        self._raise_default_tabs()

        # The arrangement before any saved layout applies: what View > Reset Layout returns to.
        self._default_state = self.saveState()
        self.resize(self.screen_size())
        self._restore_layout()

    # -- panels and documents ------------------------------------------------------------------

    def add_panel(self, spec: PanelSpec) -> QDockWidget | QWidget:
        """Create the panel of ``spec``: in a dock (objectName ``dock-<id>`` for saved layouts), or as a
        document tab for ``area="document"`` (View menu brings it back once closed)."""
        widget = spec.create(self.services)
        self.panels[spec.id] = widget
        listed = getattr(widget, "devicesListed", None)
        if listed is not None:  # the Device panel: a module waiting for a device that runs it can open now
            listed.connect(self.open_on_a_listed_device)
        if spec.area == "document":
            widget.setProperty(KEEP_ALIVE, True)
            self._document_panels[spec.id] = (widget, spec.title)
            if spec.visible:
                self.documents.open_document(widget, spec.title, key=f"panel:{spec.id}")
            else:  # opens from the View menu or when something is shown in it; owned by the window till then
                widget.setParent(self)
                widget.hide()
            if hasattr(self, "_view_menu"):
                self._view_menu.addAction(self._document_action(spec.id))
            return widget
        dock = self._add_dock(spec.id, spec.title, widget, spec.area, spec.tabify_with)
        dock.setVisible(spec.visible)
        return dock

    def _add_dock(
        self, panel_id: str, title: str, widget: QWidget, area: str, tabify_with: str | None = None
    ) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{panel_id}")
        dock.setWidget(widget)
        self.addDockWidget(AREAS[area], dock)
        if tabify_with and tabify_with in self.docks:
            self.tabifyDockWidget(self.docks[tabify_with], dock)
        self.docks[panel_id] = dock
        if hasattr(self, "_view_menu"):
            self._view_menu.addAction(dock.toggleViewAction())
        return dock

    def _document_action(self, panel_id: str) -> QAction:
        widget, title = self._document_panels[panel_id]
        action = QAction(title.replace("&", "&&"), self)  # "Compile & Phases": an "&" shown, not a mnemonic
        action.triggered.connect(lambda: self.show_panel(panel_id))
        return action

    def show_panel(self, panel_id: str) -> QWidget:
        """Bring panel ``panel_id`` forward, in its dock or as its document tab."""
        if panel_id in self._document_panels:
            widget, title = self._document_panels[panel_id]
            return self.documents.open_document(widget, title, key=f"panel:{panel_id}")
        dock = self.docks[panel_id]
        dock.show()
        dock.raise_()
        return dock.widget()

    def open_document(self, widget: QWidget, title: str, key: str | None = None) -> QWidget:
        """Show ``widget`` as a document tab (re-activating the open one with the same ``key``)."""
        return self.documents.open_document(widget, title, key)

    def show_start_page(self) -> None:
        self.documents.open_document(self.start_page, "Start", key=START_KEY)

    # -- menus, toolbar and status bar ---------------------------------------------------------

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = QAction("&Open...", self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.setToolTip("Open a .vmfb module or an .mlir source (Ctrl+O)")
        self.open_action.triggered.connect(self._open_dialog)
        file_menu.addAction(self.open_action)
        self.recent_menu = QMenu("Open &Recent", self)
        file_menu.addMenu(self.recent_menu)
        self.attach_remote_action = QAction("Attach to &Remote...", self)
        self.attach_remote_action.setToolTip("Run debug sessions in 'iree-lens serve --stdio' started by a command")
        self.attach_remote_action.triggered.connect(self._attach_remote_dialog)
        file_menu.addAction(self.attach_remote_action)
        self.parameters_action = QAction("Parameter &Archive...", self)
        self.parameters_action.setToolTip("The archive (.irpa, .gguf, .safetensors) a program compiled with "
                                          "external parameters loads its weights from (--parameters)")  # fmt: skip
        self.parameters_action.triggered.connect(self._parameters_dialog)
        file_menu.addAction(self.parameters_action)
        self.plugin_action = QAction("Executable &Plugin...", self)
        self.plugin_action.setToolTip("A shared library providing functions the program's CPU kernels import "
                                      "(--executable-plugin, iree-run-module's --executable_plugin)")  # fmt: skip
        self.plugin_action.triggered.connect(self._plugin_dialog)
        file_menu.addAction(self.plugin_action)
        self.open_remote_action = QAction("Open Remote &Module...", self)
        self.open_remote_action.setToolTip("Open a .vmfb by its path on the remote side (File > Attach to Remote first)")
        self.open_remote_action.triggered.connect(self._open_remote_dialog)
        self.open_remote_action.setEnabled(False)
        file_menu.addAction(self.open_remote_action)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        self._update_recent_menu()

        self._view_menu = self.menuBar().addMenu("&View")
        self.reset_layout_action = QAction("&Reset Layout", self)
        self.reset_layout_action.triggered.connect(self.reset_layout)
        self._view_menu.addAction(self.reset_layout_action)
        start = QAction("&Start Page", self)
        start.triggered.connect(self.show_start_page)
        self._view_menu.addAction(start)
        self._view_menu.addSeparator()
        for dock in self.docks.values():
            self._view_menu.addAction(dock.toggleViewAction())
        for panel_id in self._document_panels:
            self._view_menu.addAction(self._document_action(panel_id))

        help_menu = self.menuBar().addMenu("&Help")
        self.shortcuts_action = QAction("&Keyboard Shortcuts", self)
        self.shortcuts_action.setShortcut(QKeySequence("Ctrl+/"))
        self.shortcuts_action.triggered.connect(self.show_shortcuts)
        self.addAction(self.shortcuts_action)
        help_menu.addAction(self.shortcuts_action)
        about = QAction("&About IREE Lens", self)
        about.triggered.connect(self._about)
        help_menu.addAction(about)

    def _build_toolbar(self) -> None:
        from app.toolbar import build_main_toolbar

        self.toolbar = build_main_toolbar(self)

    def _build_status_bar(self) -> None:
        self.module_label = QLabel("No module")
        self._busy = QProgressBar()
        self._busy.setObjectName("busyProgress")
        self._busy.setRange(0, 0)  # busy until a job reports progress (a compile: its phases)
        self._busy.setMaximumWidth(220)
        self._busy.setMaximumHeight(14)
        self._busy.setVisible(False)
        self._progress_text = ""  # the running job's last step, shown in the status line
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
        self.start_page.set_recent_files(files)

    def _clear_recent(self) -> None:
        self.settings.clear_recent_files()
        self._update_recent_menu()

    def _parameters_dialog(self) -> None:
        """An archive and its scope, as iree-run-module's ``--parameters=[SCOPE=]FILE``; the module reopens
        with it (its initializer loads the weights). Several scopes: one archive at a time, each kept."""
        from PySide6.QtWidgets import QFileDialog, QInputDialog

        from engine.runtime.parameters import ParameterSpec

        path, _ = QFileDialog.getOpenFileName(self, "Parameter Archive", self.module_folder(),
                                              "Parameter archives (*.irpa *.gguf *.safetensors);;All files (*)")  # fmt: skip
        if not path:
            return
        wanted = self.parameter_scopes()  # what the open module's host code loads, if it says
        hint = f"; the module loads scope {', '.join(repr(w) for w in wanted)}" if wanted else ""
        scope, ok = QInputDialog.getText(self, "Parameter Archive", "Its scope (the program's "
                                         f'#flow.parameter.named<"SCOPE"::"key">; empty: no scope{hint}):',
                                         text=wanted[0] if wanted else "model")  # fmt: skip
        if not ok:
            return
        spec = str(ParameterSpec(scope.strip(), path))
        kept = [p for p in self.session_bridge.parameters if ParameterSpec.parse(p).scope != scope.strip()]
        self.session_bridge.set_parameters([*kept, spec])
        self.workbench.say(f"parameter archives: {', '.join(self.session_bridge.parameters)} (the module opens again "
                           "with them)")  # fmt: skip

    def _plugin_dialog(self) -> None:
        """A plugin library (iree/hal/local/executable_plugin.h) for the kernels' imports; the module reopens."""
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(self, "Executable Plugin", self.module_folder(),
                                              "Executable plugins (*.so *.sos);;All files (*)")  # fmt: skip
        if path:
            self.session_bridge.add_executable_plugins([path])
            self.workbench.say(f"executable plugins: {', '.join(self.session_bridge.executable_plugins)} (the module "
                               "opens again with them)")  # fmt: skip

    def module_folder(self) -> str:
        """The open module's folder, where its weights and inputs most likely lie ("": the current folder)."""
        loaded = self.workbench.state.module
        return str(Path(loaded.path).parent) if loaded is not None else ""

    def parameter_scopes(self) -> list[str]:
        """The scopes the open module's io_parameters calls name (``engine.runtime.vmfb.parameter_loads``)."""
        from engine.errors import LensError
        from engine.runtime.vmfb.parameter_loads import parameter_loads

        loaded = self.workbench.state.module
        if loaded is None:
            return []
        try:
            loads = parameter_loads(loaded.module)
        except LensError:
            return []
        return list(dict.fromkeys(load.scope for load in loads if load.scope is not None))

    def _attach_remote_dialog(self) -> None:
        """Debug runs go to a server a command starts (``ssh HOST iree-lens serve --stdio``); empty: local."""
        from PySide6.QtWidgets import QInputDialog

        command, ok = QInputDialog.getText(
            self, "Attach to Remote", "Command that starts 'iree-lens serve --stdio' (empty: this machine):",
            text=self.session_bridge.remote or "ssh HOST iree-lens serve --stdio",
        )
        if ok:
            self.session_bridge.attach_remote(command.strip() or None)
            self.open_remote_action.setEnabled(bool(self.session_bridge.remote))
            if self.session_bridge.remote:
                self._open_remote_dialog()
            else:
                self.statusBar().showMessage("Debug runs: this machine", 10000)

    def _open_remote_dialog(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        path, ok = QInputDialog.getText(
            self, "Open Remote Module", f"Path of a .vmfb on the remote side ({self.session_bridge.remote}):"
        )
        if ok and path.strip():
            self.open_remote_module(path.strip())

    def open_remote_module(self, path: str) -> bool:
        """Open the module at ``path`` on the remote side (relative: to the server's working directory): its
        bytes come over the session's stream once, the views read that copy, the session runs the file there."""
        if not self.session_bridge.fetch_remote_module(path):
            return False
        self._remote_fetch = path
        self.statusBar().showMessage(f"Fetching {path} from the remote side...")
        return True

    def _on_remote_module(self, local: str, remote_path: str) -> None:
        self._remote_fetch = None
        self.statusBar().showMessage(f"Opening {remote_path} (remote)...", 5000)
        self.open_file(local)

    def _on_remote_fetch_failed(self, failed) -> None:
        if self._remote_fetch is not None:  # (what fails while a fetch is under way is the fetch)
            path, self._remote_fetch = self._remote_fetch, None
            self.messages.error(f"Cannot open {path} on the remote side: {failed.message}")

    def _open_dialog(self) -> None:
        start = str(self.settings.recent_files()[0].parent) if self.settings.recent_files() else ""
        patterns = " ".join(f"*{s}" for s in OPENABLE_SUFFIXES)
        traces = " ".join(f"*{s}" for s in TRACE_SUFFIXES)
        name, _ = QFileDialog.getOpenFileName(
            self,
            "Open",
            start,
            f"IREE modules and sources ({patterns});;Traces ({traces});;Capture bundles (manifest.json *.zip)"
            ";;IREE HAL replays (*.ireereplay)"
            ";;All files (*)",
        )
        if name:
            self.open_file(name)

    def load_numpy_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Load inputs", self.module_folder(), "numpy arrays (*.npy *.npz)")
        if name:
            self.load_numpy_inputs(Path(name))

    def load_numpy_inputs(self, path: Path) -> None:
        if self.run_inputs is None:
            self.messages.warning(f"{path.name}: no function to give inputs to (the VM stepper is not open)")
            return
        self.run_inputs.load_numpy(path)
        self.show_panel("stepper")
        self.messages.info(f"inputs from {path}")

    # -- actions -------------------------------------------------------------------------------

    def compile_current(self) -> None:
        """Compile the program in the compile panel (the open module's source when it has one)."""
        panel = self.panels.get("compile")
        if panel is None:
            return
        self.show_panel("compile")
        if not panel.source.text().strip():
            loaded = self.context.module
            if loaded is not None and loaded.source is not None:
                panel.set_source(loaded.source)
        panel.compile()

    def run_function(self) -> bool:
        """Run the chosen function, making inputs from its signature when the line is empty; says why
        when it cannot (status bar)."""
        if "stepper" in self.panels and self.workbench.why_not_run() is None:
            self.show_panel("stepper")
        return self.workbench.run()

    def profile_current_run(self) -> int:
        """Profile this run: the chosen function with its inputs (made from the signature when empty), timed
        by IREE's HAL profiling on the selected device, shown in the Zones view. -1 (and why) when it cannot."""
        loaded = self.workbench.module
        why = None
        if loaded is None:
            why = "Nothing to profile: open a module first."
        elif self.workbench.state.mismatch is not None:
            why = self.workbench.state.mismatch.describe()
        elif not self.workbench.state.function:
            why = "Nothing to profile: the module exports no function to run."
        elif "zones" not in self.panels:
            why = "The Zones view is not part of this window."
        if why is None and self.run_inputs is not None:
            why = self.run_inputs.before_run()
        if why is not None:
            self.workbench.say(f"Not profiled: {why}")
            return -1
        from app.run_profile import profile_run_job

        function = self.workbench.state.function
        device = self.workbench.device
        self.workbench.say(f"Profiling {function} on {device}…")
        return self.worker.submit(
            profile_run_job,
            str(loaded.path),
            function,
            list(self.workbench.state.inputs),
            device,
            parameters=tuple(self.session_bridge.parameters),
            tag="profile-run",
            on_result=self._show_profile,
            on_error=lambda err: self.messages.error(f"Profiling failed: {err.message}", err.details),
        )

    def _show_profile(self, loaded) -> None:
        zones = self.show_panel("zones")
        zones.set_trace(loaded.trace, loaded.index, loaded.stats, loaded.by_source, loaded.by_source_note)
        self.workbench.say(
            f"Profiled {loaded.trace.metadata.get('function', '')} on {loaded.trace.metadata.get('device', '')}: "
            f"{len(loaded.trace.zones):,} zones in the Zones view"
        )

    def show_shortcuts(self) -> QWidget:
        """Help > Keyboard Shortcuts: every action with a key, in a document."""
        from app.views.shortcuts_view import ShortcutsView

        return self.open_document(ShortcutsView(self), "Keyboard Shortcuts", key="shortcuts")

    # -- the current state -----------------------------------------------------------------------

    def _say(self, text: str) -> None:
        """An action that did not happen (and why), or a stop's full description: the status bar."""
        self.statusBar().showMessage(text, 20000)
        self.messages.info(text)

    def _on_module_reset(self, loaded) -> None:
        """A new module: the previous one's error banner, paused dispatch, phases and run profile go."""
        self.banner.hide()
        self.documents.close_document("paused-dispatch")
        for document in self.documents.documents():
            compilation = getattr(document, "compilation", None)
            if compilation is None or not str(document.property(KEY_PROPERTY) or "").startswith("compilation:"):
                continue
            ours = loaded is not None and (
                compilation is loaded.compilation or str(getattr(compilation, "vmfb_path", "")) == str(loaded.path)
            )
            if not ours:  # another module's phases (the Compile panel keeps the compilation for diffs)
                self.documents.close_document(document)
        # Diffs of another module's phases ("diff:<compile folder>:a:b") go with them.
        folder = getattr(getattr(loaded, "compilation", None), "out_dir", None)
        for document in self.documents.documents():
            key = str(document.property(KEY_PROPERTY) or "")
            if key.startswith("diff:") and (folder is None or not key.startswith(f"diff:{folder}:")):
                self.documents.close_document(document)
        zones = self.panels.get("zones")
        previous = self.workbench.previous_module
        trace = getattr(zones, "trace", None)
        if trace is not None and previous is not None and "function" in trace.metadata:
            if str(trace.source) == str(previous.path):  # a profile of the module that was open: it goes too
                self.documents.close_document("panel:zones")

    def _on_workbench(self, state: WorkbenchState) -> None:
        if state.run != self._shown_run:  # a new run: the previous run's paused dispatch is history
            self._shown_run = state.run
            self.documents.close_document("paused-dispatch")
        mismatch = state.mismatch
        if mismatch is None:
            self.mismatch_bar.hide()
        else:
            loaded = state.module
            switch_to = self.workbench.matching_device(self.known_devices())
            recompile = state.device if loaded is not None and loaded.source is not None else None
            self.mismatch_bar.show_mismatch(mismatch.describe(), switch_to, recompile)
        self._update_module_label(state)

    def known_devices(self) -> list[str]:
        """The devices the Device panel lists (the CPU alone until Vulkan devices are listed)."""
        panel = self.panels.get("device")
        if panel is None:
            return ["local-sync"]
        return [str(panel.combo.itemData(i)) for i in range(panel.combo.count())]

    def open_on_a_listed_device(self) -> bool:
        """The device list arrived (Vulkan devices are listed on the worker, after the window shows): a module
        opened before, for a device not listed then (a Vulkan build while only the CPU was known), opens on a
        listed device that runs it, as it would have had the list been there. True when it moved."""
        if self.workbench.state.mismatch is None:
            return False
        uri = self.workbench.matching_device(self.known_devices())
        if uri is None:
            return False  # no listed device runs it either: the mismatch bar keeps saying why
        self.workbench.set_device(uri)
        return True

    def switch_to_matching_device(self) -> bool:
        """The mismatch bar's Switch: select a device that runs the open module (it reopens there)."""
        uri = self.workbench.matching_device(self.known_devices())
        if uri is None:
            self.workbench.say("No listed device runs this module's executables (see the Device panel).")
            return False
        self.workbench.set_device(uri)
        return True

    def recompile_for_device(self) -> int:
        """The mismatch bar's Recompile: compile the open module's source for the selected device."""
        loaded = self.workbench.module
        if loaded is None or loaded.source is None:
            self.workbench.say("This module has no source here to recompile: switch the device instead.")
            return -1
        return self.open_file(loaded.source)

    def _on_answer(self, answer) -> None:
        from engine.session.protocol import Bindings

        # A stop read again (``refresh``) stays where it is, behind the document the user works in.
        if isinstance(answer, Bindings) or (isinstance(answer, Tensors) and not answer.query.refresh):
            QTimer.singleShot(0, self.raise_paused_dispatch)

    def raise_paused_dispatch(self) -> None:
        """A stop at a dispatch comes to the front: the paused dispatch's document is made current."""
        document = self.documents.document("paused-dispatch")
        if document is not None:
            self.documents.setCurrentWidget(document)

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
        from app.views.split_document import is_split_folder, open_split_document

        if is_split_folder(path):  # iree-lens split's tests: a table of tests and their verdicts per build
            open_split_document(self, path)
            return -1
        if is_bundle(path):  # a capture: its dispatch list as a document
            if open_bundle_document(self.open_document, path) is None:
                self.messages.error(f"{path}: not a readable capture bundle")
            return -1
        if path.suffix.lower() == ".ireereplay":  # IREE's HAL replay: app/views/replay_document.py
            from app.views.replay_document import open_replay_document

            return open_replay_document(self, path)
        if path.suffix.lower() in TRACE_SUFFIXES:  # a trace: the zones timeline
            return self.show_panel("zones").open_path(path)
        self._loading = path
        self.statusBar().showMessage(f"Opening {path.name}...")
        return self.worker.submit(
            load_file,
            path,
            target=self.workbench.compile_target(),  # an .mlir compiles for the selected device
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
        remote_path = self.session_bridge.remote_path_of(loaded.path)
        if remote_path is None:  # (a remote module's local copy is no file to reopen later)
            self.settings.add_recent_file(opened)
            self._update_recent_menu()
        else:
            opened = f"{remote_path} (remote: {self.session_bridge.remote})"
        self.workbench.open_module(loaded)
        if loaded.compilation is not None:
            self.open_compilation(loaded.compilation, loaded.source)
        self.messages.info(f"opened {opened}" + (f" (compiled to {loaded.path})" if loaded.source else ""))

    def open_compilation(self, compilation, source: Path | None = None):
        """Open a compilation's phase timeline and last snapshot as a document (and list it in the
        compile panel, for diffs and variants)."""
        from app.views.compilation_document import CompilationDocument

        panel = self.panels.get("compile")
        if panel is not None and all(c is not compilation for _, c in panel.compilations):
            panel.add_compilation(compilation, f"{compilation.request.target} (opened)")
        name = source.name if source is not None else compilation.module_name
        # A compile from the panel is named as the panel lists it ("A: llvm-cpu", "B: llvm-cpu traced"): the two
        # variants of one program were two documents of one title.
        label = next((lab for lab, c in panel.compilations if c is compilation), "") if panel is not None else ""
        if label and not label.endswith("(opened)"):
            name += f" ({label})"
        document = CompilationDocument(compilation, self.context, open_document=self.open_document)
        return self.open_document(document, f"Phases — {name}", key=f"compilation:{compilation.out_dir}")

    def _hide_busy(self) -> None:
        self._busy.setVisible(False)
        if self._progress_text and self.statusBar().currentMessage() == self._progress_text:
            self.statusBar().clearMessage()  # the job's last step, not a message said since
        self._progress_text = ""

    def _show_busy(self) -> None:
        self._busy.setRange(0, 0)
        self._busy.setVisible(True)

    def _on_progress(self, progress: WorkProgress) -> None:
        if progress.fraction > 0:
            self._busy.setRange(0, 1000)
            self._busy.setValue(round(progress.fraction * 1000))
        if progress.text:
            # Said in the status line, where it has room (inside the 14-px bar it wrapped onto two clipped
            # lines); it stays until the next step or the end of the job, however long a phase takes.
            self._busy.setTextVisible(False)
            self._busy.setToolTip(progress.text)
            self._progress_text = progress.text
            self.statusBar().showMessage(progress.text)

    def _on_load_failed(self, path: Path, err: WorkError) -> None:
        self._loading = None
        self.messages.error(f"Cannot open {path.name}: {err.message}", load_error_details(err))

    def _on_module_changed(self, loaded: LoadedModule | None) -> None:
        if loaded is None:
            self.setWindowTitle(APP_TITLE)
            self.module_label.setText("No module")
            return
        shown = loaded.source or loaded.path
        self.setWindowTitle(f"{shown.name} — {APP_TITLE}")
        self._update_module_label(self.workbench.state)
        self.statusBar().showMessage(f"Opened {shown}", 5000)

    def _update_module_label(self, state: WorkbenchState) -> None:
        loaded = state.module
        if loaded is None:
            self.module_label.setText(f"No module · {state.device}")
            return
        module = loaded.module
        name = getattr(module, "name", "?")
        n = len(getattr(module, "functions", []) or [])
        try:
            size = f" · {loaded.path.stat().st_size:,} bytes"
        except OSError:
            size = ""
        where = " · runs on the server" if self.session_bridge.remote else ""
        self.module_label.setText(f"@{name} · {n} functions{size} · on {state.device}{where}")
        self.module_label.setToolTip(self.workbench.runs_where(loaded))

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
        if all(f.suffix.lower() in NUMPY_SUFFIXES for f in files):
            self.load_numpy_inputs(files[0])  # arrays dropped: they are the inputs of the function
            return
        # One module at a time: the first file wins; say so when several were dropped.
        if len(files) > 1:
            self.messages.info(f"{len(files)} files dropped; opening {files[0].name}")
        self.open_file(files[0])

    # -- layout persistence --------------------------------------------------------------------

    @staticmethod
    def screen_size() -> QSize:
        """The room the primary screen offers (the window opens that large, or maximised)."""
        screen = QGuiApplication.primaryScreen()
        return screen.availableGeometry().size() if screen is not None else QSize(1366, 768)

    def _restore_layout(self) -> None:
        geometry, state = self.settings.window_layout()
        self.has_saved_geometry = geometry is not None and self.restoreGeometry(geometry)
        self._needs_default_layout = state is None or not self.restoreState(state)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._needs_default_layout:
            self._needs_default_layout = False
            # Dock sizes apply once the window has its real size, i.e. after the first show.
            QTimer.singleShot(0, self.apply_default_sizes)

    def reset_layout(self) -> None:
        """View > Reset Layout: every dock back in its place and at its default size."""
        self.restoreState(self._default_state)
        for dock in self.docks.values():
            dock.setFloating(False)
            dock.show()
        self._raise_default_tabs()
        self.apply_default_sizes()

    def _raise_default_tabs(self) -> None:
        # In each tab group, the panel a first look needs: the module tree, the stepper, the log.
        for panel_id in ("module", "stepper", "log"):
            if panel_id in self.docks:
                self.docks[panel_id].raise_()

    def apply_default_sizes(self) -> None:
        """Dock sizes of the default layout for the window's current size."""
        w, h = self.width(), self.height()
        for area, size, orientation in (
            (Qt.DockWidgetArea.LeftDockWidgetArea, max(LEFT_MIN, int(w * LEFT_FRACTION)), Qt.Orientation.Horizontal),
            (Qt.DockWidgetArea.RightDockWidgetArea, max(RIGHT_MIN, int(w * RIGHT_FRACTION)), Qt.Orientation.Horizontal),
            (Qt.DockWidgetArea.BottomDockWidgetArea, max(BOTTOM_MIN, int(h * BOTTOM_FRACTION)), Qt.Orientation.Vertical),
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
