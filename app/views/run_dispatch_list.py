"""The run's dispatches, all of them, in execution order with their run ordinals (a document panel).

The list comes from the run's recorded history (``History.dispatches``, refreshed after every stop and at
the end of the run), so it holds every dispatch that ran, not only those a stop or a progress report saw;
dispatches seen running between two answers are added as they are reported. Once a run of the same call
(module file, device, function and inputs) has finished, a later run of it lists every dispatch from the
start: those this run has not reached yet are marked "not reached yet" (greyed), from the finished run.
The Position column is the instruction position that ran the dispatch, shown only once the history has
placed it exactly (a model's dispatches share one command buffer, so they share its instruction's
position: the tooltip names the dispatches that share it); blank until then, never a guess. A name filter narrows it
(IREE's export names, substrings or globs). The dispatch the run is paused at is marked. A diverge
breakpoint's stop colours the dispatches it judged by verdict (the Verdict column, the tooltip and a legend
name it: ``dispatch_list_model``).

Right-click (or the buttons) on a row: **Break here** (a dispatch breakpoint on that ordinal), **Run to
here** (forward: run until that dispatch, then the temporary breakpoint goes; backward: travel there in the
recorded history), **Go to** (travel to a dispatch that already ran, parked in it: its tensors shown).

The paused dispatch's document (its tensors, typed) stays the work of the live dispatch panel
(``app.views.dispatch_run_live.RunDispatchesPanel``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QModelIndex, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSizePolicy,
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
    event_verdicts,
)
from app.views.elided_label import ElidedLabel
from app.views.verdict_style import legend_html
from engine.compiler.task import TaskState
from engine.session.protocol import Breakpoint, BreakpointKind


@dataclass(frozen=True)
class RunDispatch:
    ordinal: int
    name: str
    position: int | None  # the instruction that ran it (None: not placed exactly yet)
    reached: bool = True  # False: listed from a finished run of the same call, not reached by this one


class SourcePlacesJob(QObject):
    """``source_places_job`` on a thread of its own (a flow-phase compile: the engine worker is not held up by
    it); the places arrive as a queued signal on the GUI thread, with the module they belong to."""

    done = Signal(object)  # (module path, {export: places})

    def __init__(self, module_path: str, parent: QObject | None = None):
        super().__init__(parent)
        self.module_path = module_path
        self.task = TaskState()
        self.thread = threading.Thread(target=self._run, name="lens-source-places", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        """Kill its compile (another module opened, the application quitting): no compile outlives its use."""
        self.task.cancel()

    def _run(self) -> None:
        from app.views.dispatch_list_model import source_places_job

        try:
            places = source_places_job(self.module_path, self.task)
        except Exception:  # a courtesy: the list keeps the module's recorded lines
            places = {}
        try:
            self.done.emit((self.module_path, places))
        except RuntimeError:  # the list was closed meanwhile (its C++ object is gone): nobody to tell
            pass


NOT_REACHED = "not reached yet"
GREY = QBrush(QColor("#888888"))


class RunDispatchModel(DispatchListModel):
    """Dispatches by ordinal; ``paused`` marks the row the run is stopped at; a diverge breakpoint's stop
    gives the verdicts."""

    columns = ("#", "Dispatch", "Position")

    def __init__(self, parent=None):
        super().__init__(parent)
        self._index: dict[int, int] = {}

    def ordinal_of(self, row: RunDispatch) -> int:
        return row.ordinal

    def name_of(self, row: RunDispatch) -> str:
        return row.name

    def cell(self, row: RunDispatch, column: int) -> str:
        if column == 2:
            if not row.reached:
                return NOT_REACHED
            return "" if row.position is None else f"{row.position:,}"
        return super().cell(row, column)

    def foreground_of(self, row: RunDispatch, column: int) -> QBrush | None:
        return None if row.reached else GREY

    def tooltip_of(self, row: RunDispatch) -> str:
        text = super().tooltip_of(row)
        if not row.reached:
            return text + f"\n{NOT_REACHED}: listed from the last finished run of the same call"
        if row.position is None:
            return text + "\nposition not located yet (travel to it, or let the run finish)"
        sharing = [r.ordinal for r in self.rows if r.reached and r.position == row.position]
        text += f"\nran by the instruction at position {row.position:,}"
        if len(sharing) > 1:
            text += f", with dispatches #{min(sharing)}–#{max(sharing)} (one command buffer)"
        return text

    def set_rows(self, rows: list[RunDispatch]) -> None:
        self.beginResetModel()
        self.rows = sorted(rows, key=lambda r: r.ordinal)
        self._index = {r.ordinal: i for i, r in enumerate(self.rows)}
        self.endResetModel()

    def add(self, row: RunDispatch) -> None:
        """A dispatch seen running (progress): inserted at its ordinal's place if new (a row listed as not
        reached yet becomes reached)."""
        if row.ordinal in self._index:
            i = self._index[row.ordinal]
            if not self.rows[i].reached:
                self.rows[i] = row
                self.dataChanged.emit(self.index(i, 0), self.index(i, self.columnCount() - 1))
            return
        at = next((i for i, r in enumerate(self.rows) if r.ordinal > row.ordinal), len(self.rows))
        self.beginInsertRows(QModelIndex(), at, at)
        self.rows.insert(at, row)
        self._index = {r.ordinal: i for i, r in enumerate(self.rows)}
        self.endInsertRows()

    def reach_through(self, ordinal: int) -> None:
        """The run is at dispatch ``ordinal``: every dispatch before it ran (rows listed as not reached
        become reached, not placed yet)."""
        for i, r in enumerate(self.rows):
            if not r.reached and r.ordinal <= ordinal:
                self.rows[i] = RunDispatch(r.ordinal, r.name, None)
                self.dataChanged.emit(self.index(i, 0), self.index(i, self.columnCount() - 1))

    def row_of(self, ordinal: int) -> int | None:
        return self._index.get(ordinal)

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.TextAlignmentRole and index.isValid() and index.column() in (0, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return super().data(index, role)


class RunDispatchList(QWidget):
    def __init__(self, services, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runDispatchList")
        self.services = services
        self.bridge = getattr(services, "session_bridge", None)
        self.workbench = getattr(services, "workbench", None)
        self._run_to: Breakpoint | None = None  # the temporary breakpoint of "Run to here"
        # One line, elided (the whole text in its tooltip), beside the filter: in a 1366x768 window the list's
        # dock has ~175 px, and a title row of its own left three rows of dispatches.
        self.title = ElidedLabel("Run a function: every dispatch it runs is listed here, in order.", self)
        self.title.setObjectName("runDispatchTitle")
        # As wide as its text where there is room (the filter takes the rest), elided where there is not.
        self.title.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setObjectName("runDispatchFilter")
        self.filter_edit.setPlaceholderText("Filter by name (conv, *softmax*) or #ordinal")
        self.filter_edit.setClearButtonEnabled(True)
        self.model = RunDispatchModel(self)
        self.proxy = NameFilter(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView(self)
        self.table.setObjectName("runDispatchTable")
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.fitter = ColumnFitter(self.table, self.model)
        self.filter_typing = FilterTyping(self.filter_edit, self.proxy, self)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.doubleClicked.connect(lambda index: self.go_to(self._ordinal(index)))
        # Enter does what a double-click does (a keyboard user picked a row and pressed Enter: nothing happened).
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            go = QShortcut(QKeySequence(key), self.table, context=Qt.ShortcutContext.WidgetShortcut)
            go.activated.connect(lambda: self.go_to(self.selected_ordinal()))
        self.break_button = QPushButton("Break here", self)
        self.break_button.clicked.connect(lambda: self.break_here(self.selected_ordinal()))
        self.run_to_button = QPushButton("Run to here", self)
        self.run_to_button.clicked.connect(lambda: self.run_to_here(self.selected_ordinal()))
        self.filter_edit.setMinimumWidth(140)
        bar = QHBoxLayout()
        bar.addWidget(self.title)
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.break_button)
        bar.addWidget(self.run_to_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        # What the row colours mean (a diverge breakpoint's stop gives the verdicts): never colour alone.
        self.legend = QLabel(legend_html(), self)
        self.legend.setObjectName("runDispatchLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setVisible(False)
        layout.addWidget(self.legend)
        self.setMinimumSize(1, 1)

        if self.bridge is not None:
            self.bridge.historyChanged.connect(self._on_history)
            self.bridge.progressed.connect(self._on_progress)
            self.bridge.stateChanged.connect(self._on_state)
            self.bridge.stopped.connect(self._on_stop)
            self.bridge.finished.connect(self._on_end)
            self.bridge.failed.connect(self._on_end)
        if self.workbench is not None:
            self.workbench.moduleReset.connect(self._on_module)
            # The marked row is the run state's paused dispatch (a reattached or restarted session is paused
            # nowhere, whatever this list saw last).
            self.workbench.stateChanged.connect(self._on_run_state)
        context = getattr(services, "context", None)
        if context is not None:  # another view chose a dispatch (a Zones zone, a By source line): show it here
            context.dispatchChanged.connect(self._follow_context)
        self._last_state = None
        self._run = self.workbench.state.run if self.workbench is not None else 0  # the run listed
        self._finished = False
        self._failed = False  # the run ended with an error (its list is what ran before it)
        self._complete = False  # the run finished (not failed): its list is every dispatch of the call
        self._places_job: SourcePlacesJob | None = None  # the open module's places being read
        # Every dispatch (ordinal, name) of the last finished run of each call (``_call_key``): a later run
        # of the same call lists them from the start, those it has not reached marked so.
        self._known: dict[tuple, list[tuple[int, str]]] = {}

    def _on_module(self, loaded) -> None:
        """A new module: drop the old list, and read the new module's source lines on the engine worker."""
        self.clear()
        self.model.set_source_lines({})
        self.model.set_source_places({})
        if self._places_job is not None:
            self._places_job.cancel()
            self._places_job = None
        worker = getattr(self.services, "worker", None)
        if loaded is None or worker is None:
            return
        from app.views.dispatch_list_model import source_lines_job

        path = str(loaded.path)

        def done(lines: dict[str, str]) -> None:
            module = self.workbench.module if self.workbench is not None else None
            if module is not None and str(module.path) == path:  # still the module they belong to
                self.model.set_source_lines(lines)

        worker.submit(
            source_lines_job, path, tag="run-dispatch-sources", on_result=done, on_error=lambda _e: None
        )
        # Each run's own place, for an export dispatched from several (a flow-phase compile, on its own thread).
        self._places_job = SourcePlacesJob(path, self)
        self._places_job.done.connect(self._on_places)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self._places_job.cancel)
        self._places_job.start()

    def _on_places(self, found) -> None:
        path, places = found
        module = self.workbench.module if self.workbench is not None else None
        if places and module is not None and str(module.path) == path:  # still the module they belong to
            self.model.set_source_places(places)

    # -- the list ---------------------------------------------------------------------------------

    def clear(self) -> None:
        """Another module: nothing of the last one's list stays (its rows, marks, verdicts, the filter)."""
        self.model.set_rows([])
        self.model.set_paused(None)
        self.set_verdicts({})
        self._finished = self._failed = False
        self.filter_edit.clear()
        self.filter_typing.apply()
        self.title.setText("Run a function: every dispatch it runs is listed here, in order.")

    def _on_state(self, state: str) -> None:
        # Without the window's run state (a list on its own), a call is a run from idle.
        if self.workbench is None and state == "running" and self._last_state == "idle":
            self._new_run()
        self._last_state = state

    def _new_run(self) -> None:
        """A new call: a new list (travelling in the last run's history is not one)."""
        self.model.set_rows(self._with_known([]))
        self.model.set_paused(None)
        self.set_verdicts({})
        self._finished = self._complete = self._failed = False
        self.model.set_source_places(self.model.source_places, runs_complete=False)
        self._retitle()

    def _on_run_state(self, state) -> None:
        if state.run != self._run:
            self._run = state.run
            self._new_run()
        if state.dispatch != self.model.paused:
            self.model.set_paused(state.dispatch)
            self._retitle()

    def _call_key(self) -> tuple | None:
        """What makes two runs run the same dispatches: the module file (and its time), the device, the
        function and its inputs (files by their time too). None: no call yet."""
        bridge = self.bridge
        call = getattr(bridge, "last_call", None) if bridge is not None else None
        module = getattr(bridge, "module_path", None)
        if call is None or module is None:
            return None

        def stamp(path: str) -> float | None:
            try:
                return Path(path).stat().st_mtime
            except OSError:
                return None

        inputs = tuple((i, stamp(i[1:]) if i.startswith("@") else None) for i in call.inputs)
        return (module, stamp(module), str(bridge.device), call.function, inputs)

    def _with_known(self, rows: list[RunDispatch]) -> list[RunDispatch]:
        """``rows`` (what this run reached) and, after them, the rest of the last finished run of the same
        call, marked not reached."""
        known = self._known.get(self._call_key(), [])
        reached = {r.ordinal for r in rows}
        last = max(reached, default=-1)
        return rows + [
            RunDispatch(o, n, None, reached=False) for o, n in known if o > last and o not in reached
        ]

    def _remember(self) -> None:
        """The list of a finished run: every dispatch of its call."""
        key = self._call_key()
        rows = [r for r in self.model.rows if r.reached]
        if key is not None and rows and [r.ordinal for r in rows] == list(range(len(rows))):
            self._known[key] = [(r.ordinal, r.name) for r in rows]

    def _on_history(self, history) -> None:
        if history is None:
            return
        rows = [RunDispatch(m.ordinal, m.name, m.position if m.exact else None) for m in history.dispatches]
        self.model.set_rows(self._with_known(rows))
        if self._complete:
            self._remember()
        self._retitle()

    def _on_progress(self, progress) -> None:
        info = progress.location.dispatch_info
        if info is not None:
            self.model.add(RunDispatch(info.ordinal, info.export, None))
            self.model.reach_through(info.ordinal)
            self._retitle()

    def _on_stop(self, event) -> None:
        info = event.location.dispatch_info
        self.model.set_paused(info.ordinal if info is not None else None)
        if info is not None:
            self.model.add(RunDispatch(info.ordinal, info.export, None))
            self.model.reach_through(info.ordinal)
        marks = event_verdicts(event)
        if marks is not None:
            self.set_verdicts(marks)
        self._drop_run_to()
        self._retitle()

    def set_verdicts(self, verdicts: dict[int, VerdictMark]) -> None:
        """Colour the rows by these verdicts (by ordinal; ``{}``: none), the legend shown with them."""
        self.model.set_verdicts(verdicts)
        self.legend.setVisible(bool(verdicts))

    def _on_end(self, event) -> None:
        marks = event_verdicts(
            event, self.model.verdicts
        )  # a Finished event: what a diverge breakpoint judged
        if marks is not None:
            self.set_verdicts(marks)
        finished = type(event).__name__ == "Finished"
        if not finished and self.workbench is not None and self.workbench.state.outcome != "failed":
            return  # a refused query, not the end of the run
        ended = self.bridge.state == "idle"
        self._complete = self._finished = ended and finished
        self.model.set_source_places(self.model.source_places, runs_complete=self._complete)
        self._failed = ended and not finished
        if self._complete:
            self._remember()
        self.model.set_paused(None)
        self._drop_run_to()
        self._retitle()

    def _retitle(self) -> None:
        n = sum(1 for r in self.model.rows if r.reached)
        ahead = len(self.model.rows) - n
        where = ""
        diverged = [o for o, m in self.model.verdicts.items() if m.verdict == "diverged"]
        if diverged:
            where = f" · diverged from the reference at #{min(diverged)}"
        if self.model.paused is not None:
            where += f" · paused at #{self.model.paused}"
        elif self._finished:
            where += " · finished"
        elif self._failed:
            where += " · the run failed" + (" before its first dispatch" if n == 0 else "")
        if ahead:
            where += f" · {ahead:,} more not reached yet (from the last finished run of this call)"
        elif self.model.paused is not None and max((r.ordinal for r in self.model.rows), default=-1) <= self.model.paused:
            where += " · the rest are listed as the run reaches them"
        self.title.setText(f"{n:,} dispatch{'es' if n != 1 else ''} in execution order{where}")

    # -- acting on a row --------------------------------------------------------------------------

    def _ordinal(self, index: QModelIndex) -> int | None:
        if not index.isValid():
            return None
        value = self.proxy.mapToSource(index).siblingAtColumn(0).data(Qt.ItemDataRole.UserRole)
        return int(value) if value is not None else None

    def selected_ordinal(self) -> int | None:
        return self._ordinal(self.table.currentIndex())

    def select_ordinal(self, ordinal: int) -> bool:
        row = self.model.row_of(ordinal)
        if row is None:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            return False
        self.table.setCurrentIndex(index)
        self.table.scrollTo(index)
        return True

    def _follow_context(self, dispatch: str | None) -> None:
        """The context names a dispatch by IREE's name: select its first run in this list."""
        row = next((r for r in self.model.rows if r.name == dispatch), None) if dispatch else None
        if row is not None:
            self.select_ordinal(row.ordinal)

    def _say(self, text: str) -> None:
        if self.workbench is not None:
            self.workbench.say(text)
        else:
            self.title.setText(text)

    def break_here(self, ordinal: int | None) -> bool:
        """A dispatch breakpoint before dispatch ``ordinal`` of every run."""
        if ordinal is None or self.bridge is None:
            self._say("Break here: pick a dispatch in the list first.")
            return False
        self.bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=ordinal))
        self._say(f"Breakpoint before dispatch #{ordinal}")
        return True

    def run_to_here(self, ordinal: int | None) -> bool:
        """Run until dispatch ``ordinal`` (forward: a temporary breakpoint; one that already ran: travel
        back to it in the recorded history)."""
        bridge = self.bridge
        if ordinal is None or bridge is None:
            self._say("Run to here: pick a dispatch in the list first.")
            return False
        current = self.model.paused
        if bridge.state == "stopped" and current is not None and ordinal <= current:
            return self.go_to(ordinal)
        if bridge.state == "stopped":
            self._set_run_to(ordinal)
            bridge.continue_()
            return True
        if bridge.state == "idle":
            if self._finished and bridge.can_reverse:
                return self.go_to(ordinal)
            self._set_run_to(ordinal)
            if self.workbench is not None and self.workbench.run():
                return True
            self._drop_run_to()
            return False
        self._say(f"Run to here: the run is {bridge.state}; wait for it to stop (Shift+F5 stops it).")
        return False

    def go_to(self, ordinal: int | None) -> bool:
        """Travel to a dispatch that already ran, parked in it (its tensors shown)."""
        bridge = self.bridge
        if ordinal is None or bridge is None:
            return False
        if not bridge.can_reverse:
            self._say("Go to a dispatch: needs a recorded run (paused, or finished).")
            return False
        bridge.travel_to(dispatch=ordinal)
        return True

    def _set_run_to(self, ordinal: int) -> None:
        self._drop_run_to()
        bp = Breakpoint(BreakpointKind.DISPATCH, ordinal=ordinal)
        if bp not in self.bridge.breakpoints:
            self._run_to = bp
            self.bridge.add_breakpoint(bp)

    def _drop_run_to(self) -> None:
        if self._run_to is not None and self.bridge is not None:
            bp, self._run_to = self._run_to, None
            self.bridge.remove_breakpoint(bp)

    def _context_menu(self, pos: QPoint) -> None:
        ordinal = self._ordinal(self.table.indexAt(pos))
        if ordinal is None:
            return
        menu = QMenu(self.table)
        menu.addAction(f"Break here (before #{ordinal})", lambda: self.break_here(ordinal))
        menu.addAction(f"Run to here (#{ordinal})", lambda: self.run_to_here(ordinal))
        go = menu.addAction(f"Go to #{ordinal} (travel back, parked in it)", lambda: self.go_to(ordinal))
        go.setEnabled(self.bridge is not None and self.bridge.can_reverse)
        export = menu.addAction(f"Export #{ordinal} as test…", lambda: self.export_test(ordinal))
        export.setEnabled(self.why_no_export() is None)
        export.setToolTip(
            self.why_no_export() or "write this dispatch as a standalone test (iree-lens split)"
        )
        menu.popup(self.table.viewport().mapToGlobal(pos))

    # -- Export as test ---------------------------------------------------------------------------

    def why_no_export(self) -> str | None:
        """Why no dispatch can be exported now (None: it can): a test is cut from the program's source."""
        module = self.workbench.module if self.workbench is not None else None
        if module is None or module.source is None or Path(module.source).suffix not in (".mlir", ".mlirbc"):
            return "Export as test needs the program's .mlir source (open the .mlir, not only the .vmfb)"
        if not self.workbench.state.function:
            return "Export as test needs the function the run calls"
        return None

    def export_test(self, ordinal: int | None) -> int | None:
        """Ask for a folder, then write dispatch ``ordinal`` there as a standalone test."""
        if ordinal is None:
            return None
        folder = QFileDialog.getExistingDirectory(self, "Export as test into")
        if not folder:
            return None
        # its own new folder inside the chosen one (a split folder holds nothing else)
        stem = Path(self.workbench.module.source).stem if self.workbench and self.workbench.module else "program"
        target, n = Path(folder) / f"{stem}_dispatch_{ordinal}", 1
        while target.exists():
            n += 1
            target = Path(folder) / f"{stem}_dispatch_{ordinal}_{n}"
        return self.export_test_to(ordinal, target)

    def export_test_to(self, ordinal: int, folder: Path) -> int | None:
        """Write dispatch ``ordinal`` (its executable and shapes, every run of it) into ``folder`` as
        ``iree-lens split`` does, on the engine worker; the folder opens as a table of its one test."""
        why = self.why_no_export()
        row = self.model.row_of(ordinal)
        worker = getattr(self.services, "worker", None)
        if why is not None or row is None or worker is None:
            self._say(why or f"Export as test: dispatch #{ordinal} is not listed")
            return None
        from engine.compiler import CompileRequest
        from engine.split.splitter import split_program

        name = self.model.rows[row].name
        state = self.workbench.state
        request = CompileRequest.from_file(state.module.source, target=self.workbench.compile_target())
        self._say(f"Exporting #{ordinal} ({name}) as a test into {folder}…")
        return worker.submit(
            split_program, request, state.function, list(state.inputs), folder, only={name},
            tag=f"export-test:{folder}", on_result=lambda result: self._exported(result, name),
            on_error=lambda error: self._say(f"Export as test failed: {error.message}"),
        )  # fmt: skip

    def _exported(self, result, name: str) -> None:
        written = [t for t in result.tests if not t.error]
        if not written:
            reason = result.tests[0].error if result.tests else f"the run made no dispatch named {name}"
            self._say(f"Export as test: nothing written ({reason})")
            return
        self._say(f"Exported {name} as {result.directory / written[0].dir}")
        open_file = getattr(self.services, "open_file", None)
        if open_file is not None:
            open_file(str(result.directory))


def run_dispatch_list(services) -> RunDispatchList:
    return RunDispatchList(services)
