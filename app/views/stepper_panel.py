"""The VM stepper panel: run a function of the open module in the debug engine, one instruction at a time.

Left, the disassembly of the current function (the next instruction marked, breakpoints in the margin);
right, the registers of the selected frame, the call stack, globals and the breakpoint list; below, the
output (results as ``iree-run-module`` prints them, failures, crash reports). The run bar shows and edits
the window's function and inputs (``--input`` syntax): they are the workbench's (``app/workbench.py``), the
run bar keeps no copy of its own. Keys are the ones debuggers use: F5 continue, F10 step over,
F11 step into, Shift+F11 step out, F9 toggle breakpoint, Ctrl+F10 run to cursor, Shift+F5 stop. The run is
recorded, so it can also go back (``stepper_reverse``: Ctrl+Shift+F11/F10, Alt+Shift+F11, Ctrl+Shift+F5,
Shift+F6, the run position timeline and "When did this change?" on registers and globals).

The panel only talks to a :class:`~app.session_bridge.SessionBridge` (commands in, signals out); the
debuggee runs in the session's own process, so the window never waits for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QFontMetrics, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.context import LoadedModule
from app.panels import PanelServices
from app.session_bridge import SessionBridge
from app.views.action_strip import ActionStrip
from app.views.hex_view import monospace_font
from app.views.run_results import RunResults
from app.views.running_label import RunningStatus
from app.views.stepper_breakpoints import BreakpointsView
from app.views.stepper_inputs import format_inputs_line, parse_inputs_line
from app.views.stepper_listing import StepperListing
from app.views.stepper_reverse import ReverseControls
from app.views.stepper_state import CallStackView, GlobalsView, RegistersView
from app.workbench import Workbench, callable_first
from engine.runtime.hal.constants import format_shape_and_type
from engine.runtime.hal.executable_plugins import NO_PLUGIN
from engine.runtime.parameters import NO_ARCHIVE
from engine.runtime.vmfb.global_names import GlobalNames, NamedGlobal
from engine.session.protocol import (
    INITIALIZER,
    Answer,
    Breakpoint,
    Call,
    Crashed,
    Failed,
    Finished,
    GlobalBuffer,
    Globals,
    Opened,
    ReadGlobalBuffer,
    ReadGlobals,
    ReadRegisters,
    Registers,
    Stopped,
    WatchGlobalContents,
)

_BANNER = "QFrame#{name} {{ background:{bg}; border:1px solid {border}; border-radius:3px; }} QLabel {{ color:{fg}; }}"


def _banner(name: str, bg: str, border: str, fg: str) -> QFrame:
    frame = QFrame()
    frame.setObjectName(name)
    frame.setStyleSheet(_BANNER.format(name=name, bg=bg, border=border, fg=fg))
    frame.hide()
    return frame


__all__ = ["StepperPanel", "callable_first"]


# The width of the side-by-side layout, in monospace characters: a listing line's pc and ~48 characters of its
# instruction, and the registers' name, i32 and hex columns (StepperPanel.side_by_side_width).
CODE_CHARS, STATE_CHARS = 58, 34


class StepperPanel(QWidget):
    def __init__(
        self, services: PanelServices, bridge: SessionBridge | None = None, parent: QWidget | None = None
    ):
        super().__init__(parent)
        self.setObjectName("stepperPanel")
        self.services = services
        self.context = services.context
        # The window's one session (PanelServices.session_bridge); a panel built on its own makes one.
        if bridge is None:
            bridge = getattr(services, "session_bridge", None)
        self.bridge = bridge if bridge is not None else SessionBridge(services.context, parent=self)
        # The window's one current state: the function and inputs the run bar shows, and the runs it starts.
        # A panel built on its own makes its own (and opens the context's modules in it).
        workbench = getattr(services, "workbench", None)
        self.standalone = workbench is None
        self.workbench = workbench if workbench is not None else Workbench(self.context, self.bridge, parent=self)
        self._rendering = False  # the run bar is being redrawn from the state: its edits are not the user's
        self._shown_functions: tuple[str, ...] | None = None
        self._chosen: str | None = None  # the chosen function last drawn (its code shows while idle)
        self.vmfb: Any = None  # the parsed module (engine.runtime.vmfb.VmfbModule) whose code is shown
        self.shown_function: str | None = None
        self.shown_ordinal: int | None = None
        self.shown_module: str | None = None  # a module the program calls, when its function is shown
        self.selected_frame: int | None = None  # index in the stop's frames (0 = outermost)
        self._listings: dict[tuple[str, int], list] = {}  # by module name and function ordinal
        self._loaded: LoadedModule | None = None
        self._linked: dict[str, Any] | None = None  # the modules the program calls, by name (read when needed)
        # Global names the session found where the module's folder had none (a rebuild's phases).
        self._session_names: GlobalNames | None = None
        self._pending_restore = None
        self._failure_message = None  # the banner's "the run failed" while it is the present (Message)
        self._watching_window = False
        self._grown = False

        self._build_actions()
        self._build_widgets()
        self.running_status = RunningStatus(
            self.status_label, lambda: "on the server" if self.bridge.remote else "", self
        )
        self.reverse = ReverseControls(self)  # reverse actions, the timeline, when-changed menus
        self.layout().insertWidget(self.layout().indexOf(self.toolbar) + 1, self.reverse.bar)
        self._connect()
        self._on_state(self.bridge.state)
        self.workbench.moduleReset.connect(self.reset_for_module)
        self.workbench.stateChanged.connect(self._on_workbench)
        self.workbench.runStarted.connect(self._on_run_started)
        self.workbench.runRefused.connect(self._on_run_refused)
        self._on_workbench(self.workbench.state)

        saved = self.bridge.saved_session()
        if saved is not None:
            self._offer_restore(saved)
        if self.context.module is not None:
            self._on_module(self.context.module)

    def sizeHint(self) -> QSize:
        return QSize(1000, 420)

    def minimumSizeHint(self) -> QSize:
        return QSize(320, 150)

    # -- construction ---------------------------------------------------------------------------

    def make_action(self, text: str, key: str | None, slot, tip: str) -> QAction:
        action = QAction(text, self)
        if key:
            action.setShortcut(QKeySequence(key))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            tip = f"{tip} ({key})"
            self._explain_when_disabled(action, key, text)
        action.setToolTip(tip)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _explain_when_disabled(self, action: QAction, key: str, text: str) -> None:
        """A key whose action is disabled would do nothing and say nothing: while the action is disabled, a
        shortcut on the same key says why instead (enabled exactly then, so the two never compete)."""
        explain = QShortcut(QKeySequence(key), self)
        explain.setContext(Qt.ShortcutContext.WindowShortcut)
        name = text.lstrip("▶↷↓↑⇢⇠◀↶↺ ").strip()
        explain.activated.connect(lambda: self._say_why_not(name))
        explain.setEnabled(not action.isEnabled())
        action.changed.connect(lambda: explain.setEnabled(not action.isEnabled()))

    def _say_why_not(self, name: str) -> None:
        reason = {
            "closed": "no module is open (File > Open)",
            "starting": "the session is starting",
            "running": "the program is running (Shift+F5 stops it)",
            "idle": "no run is paused: Run (Ctrl+R) or Run to Entry first",
        }.get(self.bridge.state, f"the run is {self.bridge.state}")
        text = f"{name}: {reason}"
        self.status_label.setText(text)
        self.workbench.say(text)

    def _build_actions(self) -> None:
        b = self.bridge
        self.continue_action = self.make_action(
            "▶ Continue", "F5", b.continue_, "Continue to the next breakpoint"
        )
        self.step_over_action = self.make_action("↷ Step Over", "F10", b.step_over, "Step over calls")
        self.step_into_action = self.make_action("↓ Step Into", "F11", b.step_into, "Execute one instruction")
        self.step_out_action = self.make_action(
            "↑ Step Out", "Shift+F11", b.step_out, "Run until this function returns"
        )
        self.next_dispatch_action = self.make_action(
            "⇢ Next Dispatch", "F6", b.next_dispatch, "Run to the next dispatch (stops before it runs)"
        )
        self.run_to_cursor_action = self.make_action(
            "⇥ Run to Cursor", "Ctrl+F10", self.run_to_cursor, "Run to the line of the cursor"
        )
        self.stop_action = self.make_action(
            "■ Stop", "Shift+F5", b.stop, "Pause the run; kill it if it does not answer"
        )
        self.toggle_bp_action = self.make_action(
            "● Breakpoint", "F9", self.toggle_breakpoint_at_cursor, "Toggle a breakpoint on the cursor's line"
        )
        self.debug_initializer_action = self.make_action(
            "Debug the &Initializer", None, self.debug_initializer,
            f"Open the module again with its initializer ({INITIALIZER}) left to a call: the dispatches IREE "
            "runs as the module loads (weights it transposes, packs or dequantizes) stop and show like a call's. "
            f"{INITIALIZER} runs first, then the other functions",
        )  # fmt: skip
        self.debug_initializer_action.setEnabled(False)  # a module with an initializer enables it

    def _build_widgets(self) -> None:
        self._build_banners()
        run_bar = self._build_run_bar()
        self._build_toolbar()
        code = self._build_code()
        self._build_state()
        self._build_output()
        self._lay_out(run_bar, code)

    def _build_banners(self) -> None:
        # Restore offer and crash report: non-modal banners at the top.
        self.restore_banner = _banner("stepperRestoreBanner", "#cfe2ff", "#9ec5fe", "#052c65")
        self.restore_label = QLabel(self.restore_banner)
        self.restore_label.setWordWrap(True)
        self.restore_button = QPushButton("Restore", self.restore_banner)
        self.restore_button.clicked.connect(self.restore_last_session)
        self.dismiss_restore_button = QPushButton("Dismiss", self.restore_banner)
        self.dismiss_restore_button.clicked.connect(self.restore_banner.hide)
        row = QHBoxLayout(self.restore_banner)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.restore_label, 1)
        row.addWidget(self.restore_button)
        row.addWidget(self.dismiss_restore_button)

        self.crash_banner = _banner("stepperCrashReport", "#f8d7da", "#f1aeb5", "#58151c")
        self.crash_label = QLabel(self.crash_banner)
        self.crash_label.setObjectName("stepperCrashText")
        self.crash_label.setWordWrap(True)
        self.crash_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.rerun_button = QPushButton("Rerun", self.crash_banner)
        self.rerun_button.setObjectName("stepperRerun")
        self.rerun_button.clicked.connect(self.rerun)
        self.dismiss_crash_button = QPushButton("Dismiss", self.crash_banner)
        self.dismiss_crash_button.clicked.connect(self.crash_banner.hide)
        row = QHBoxLayout(self.crash_banner)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.crash_label, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.rerun_button)
        buttons.addWidget(self.dismiss_crash_button)
        buttons.addStretch(1)
        row.addLayout(buttons)

    def _build_run_bar(self) -> QVBoxLayout:
        # Run bar: function, inputs, run buttons.
        self.function_combo = QComboBox(self)
        self.function_combo.setObjectName("stepperFunction")
        self.function_combo.setMinimumContentsLength(14)
        self.function_combo.currentTextChanged.connect(self._on_function_edited)
        self.inputs_edit = QLineEdit(self)
        self.inputs_edit.setObjectName("stepperInputs")
        self.inputs_edit.setPlaceholderText('--input="4x8xf32=1 2 3" --input=7   (iree-run-module syntax)')
        self.inputs_edit.setFont(monospace_font())
        self.inputs_edit.textChanged.connect(self._on_inputs_edited)
        self.inputs_edit.returnPressed.connect(self.run)
        self.run_button = QPushButton("▶ Run", self)
        self.run_button.setObjectName("stepperRun")
        self.run_button.setToolTip("Run the function to its end or to a breakpoint")
        self.run_button.clicked.connect(self.run)
        self.entry_button = QPushButton("Run to Entry", self)
        self.entry_button.setObjectName("stepperRunToEntry")
        self.entry_button.setToolTip("Start the call and stop at its first instruction")
        self.entry_button.clicked.connect(self.run_to_entry)
        self.device_label = QLabel(self)
        self.device_label.setStyleSheet("color:#555;")
        # Two rows, so each control keeps its readable size in a 1366-px window's dock: the function and the
        # device; the inputs (the long field) with the buttons that use them.
        run_bar = QVBoxLayout()
        run_bar.setContentsMargins(4, 2, 4, 2)
        run_bar.setSpacing(2)
        first = QHBoxLayout()
        first.addWidget(QLabel("Function:"))
        first.addWidget(self.function_combo, 1)
        first.addWidget(self.device_label)
        second = QHBoxLayout()
        second.addWidget(QLabel("Inputs:"))
        second.addWidget(self.inputs_edit, 1)
        second.addWidget(self.run_button)
        second.addWidget(self.entry_button)
        run_bar.addLayout(first)
        run_bar.addLayout(second)
        return run_bar

    def _build_toolbar(self) -> None:
        # Toolbar: the stepping actions and where the run is.
        # An ActionStrip, not a QToolBar: in a narrow dock (a 1366-px window) it wraps onto a second row
        # instead of hiding actions in a » menu.
        self.toolbar = ActionStrip(self)
        self.toolbar.setObjectName("stepperToolbar")
        for action in (
            self.continue_action,
            self.step_over_action,
            self.step_into_action,
            self.step_out_action,
            self.next_dispatch_action,
            self.run_to_cursor_action,
            self.stop_action,
        ):
            self.toolbar.addAction(action)
        self.toolbar.addSeparator()
        self.toolbar.addAction(self.toggle_bp_action)
        self.limits_menu = QMenu("Limits", self)
        self.limits_menu.addAction("Stop limit (kill a run that does not pause)…", self._ask_stop_limit)
        self.limits_menu.addAction("Hang limit (kill a silent run; 0 = off)…", self._ask_hang_limit)
        limits = QToolButton(self)
        limits.setText("Limits")
        limits.setToolTip("How long Stop waits before killing the run, and the hang watchdog")
        limits.setMenu(self.limits_menu)
        limits.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.toolbar.addWidget(limits)
        # Where the run is (stop reason, position, answers): on the history bar's row (stepper_reverse), which
        # has the width a long line needs; elided there rather than pushing the toolbar into overflow.
        self.status_label = QLabel(self)
        self.status_label.setObjectName("stepperStatus")

    def _build_code(self) -> QWidget:
        # Disassembly.
        self.function_title = QLabel(self)
        self.function_title.setObjectName("stepperFunctionTitle")
        self.function_title.setStyleSheet("font-weight:bold; padding:2px 4px;")
        self.function_title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.listing = StepperListing(self)
        self.listing.marginClicked.connect(self._on_margin_clicked)
        code = QWidget(self)
        code_layout = QVBoxLayout(code)
        code_layout.setContentsMargins(0, 0, 0, 0)
        code_layout.setSpacing(0)
        code_layout.addWidget(self.function_title)
        code_layout.addWidget(self.listing, 1)
        return code

    def _build_state(self) -> None:
        # State: registers; call stack / globals / breakpoints.
        self.registers = RegistersView(self)
        self.call_stack = CallStackView(self)
        self.call_stack.frameSelected.connect(self.select_frame)
        self.globals_view = GlobalsView(self)
        self.globals_view.bufferRequested.connect(lambda ordinal: self.bridge.evaluate(ReadGlobalBuffer(ordinal)))
        self.breakpoints_view = BreakpointsView(self)
        self.breakpoints_view.addRequested.connect(self.bridge.add_breakpoint)
        self.breakpoints_view.removeRequested.connect(self.bridge.remove_breakpoint)
        self.breakpoints_view.activated.connect(self._show_breakpoint)
        self.breakpoints_view.refused.connect(self.workbench.say)
        self.breakpoints_view.references_are_local = lambda: not self.bridge.remote
        self.state_tabs = QTabWidget(self)
        self.state_tabs.setObjectName("stepperStateTabs")
        self.state_tabs.addTab(self.call_stack, "Call Stack")
        self.state_tabs.addTab(self.breakpoints_view, "Breakpoints")
        self.state_tabs.addTab(self.globals_view, "Globals")
        # In a 1366-px window's ~210-px pane the three names need ~270 px: elided ("Call St…"), every tab in
        # sight, rather than scroll arrows hiding Globals; the whole name in each tab's tooltip.
        self.state_tabs.setUsesScrollButtons(False)
        self.state_tabs.setElideMode(Qt.TextElideMode.ElideRight)
        for i in range(self.state_tabs.count()):
            self.state_tabs.setTabToolTip(i, self.state_tabs.tabText(i))

    def _build_output(self) -> None:
        self.output = QPlainTextEdit(self)
        self.output.setObjectName("stepperOutput")
        self.output.setReadOnly(True)
        self.output.setFont(monospace_font())
        self.output.setMaximumBlockCount(20000)
        self.output.setPlaceholderText("Results and errors of runs appear here.")

    def _lay_out(self, run_bar: QVBoxLayout, code: QWidget) -> None:
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(self.registers)
        right.addWidget(self.state_tabs)
        right.setSizes([260, 160])
        self.state_splitter = right
        left = QSplitter(Qt.Orientation.Vertical, self)
        left.addWidget(code)
        output_box = QWidget(self)
        output_layout = QVBoxLayout(output_box)
        output_layout.setContentsMargins(0, 0, 0, 0)
        output_layout.setSpacing(2)
        output_layout.addWidget(self.output, 1)
        self.results = RunResults(self.bridge, self.workbench, output_box)  # the last run's results, as .npy
        output_layout.addWidget(self.results)
        left.addWidget(output_box)
        left.setSizes([320, 90])
        self.code_splitter = left
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setSizes([620, 380])
        self.splitter.setObjectName("stepperSplitter")

        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addWidget(self.restore_banner)
        layout.addWidget(self.crash_banner)
        layout.addLayout(run_bar)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.splitter, 1)

    def _connect(self) -> None:
        b = self.bridge
        b.opened.connect(self._on_opened)
        b.stopped.connect(self._on_stopped)
        b.finished.connect(self._on_finished)
        b.failed.connect(self._on_failed)
        b.crashed.connect(self._on_crashed)
        b.answered.connect(self._on_answer)
        b.sourcesSettled.connect(self._on_sources_settled)
        b.logged.connect(lambda text: self.services.messages.info(text))
        b.stateChanged.connect(self._on_state)
        b.progressed.connect(self._on_progress)
        b.breakpointsChanged.connect(self._on_breakpoints)
        self.context.moduleChanged.connect(self._on_module)
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.bridge.shutdown)

    # -- the code beside the state, or above it where the panel is narrow ---------------------------

    def side_by_side_width(self) -> int:
        """The narrowest panel that has the code beside the registers: a line of code (its pc, and about 48
        characters of instruction) and the registers' name, i32 and hex columns."""
        char = QFontMetrics(monospace_font()).horizontalAdvance("0")
        return (CODE_CHARS + STATE_CHARS) * char

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - QResizeEvent
        super().resizeEvent(event)
        self._fit_orientation()

    def _fit_orientation(self) -> None:
        """Side by side (code | registers over the call stack) where the panel is wide enough for both; else
        stacked, the code the panel's whole width over the registers beside the call stack. The right dock of
        a 1366-px window is ~520 px: side by side cut the code to ~290 px (half of most instructions) and the
        registers to ~210 (their hex column half hidden)."""
        stacked = self.width() < self.side_by_side_width()
        want = Qt.Orientation.Vertical if stacked else Qt.Orientation.Horizontal
        if self.splitter.orientation() == want:
            return
        self.splitter.setOrientation(want)
        self.state_splitter.setOrientation(Qt.Orientation.Horizontal if stacked else Qt.Orientation.Vertical)
        # The splitters have their new sizes once the layout ran: share them out then.
        QTimer.singleShot(0, self, self._share_out)

    def _share_out(self) -> None:
        """The default shares of the current orientation: the code keeps most of the room either way."""
        stacked = self.splitter.orientation() == Qt.Orientation.Vertical
        for splitter, shares in (
            (self.splitter, (0.68, 0.32) if stacked else (0.62, 0.38)),
            (self.code_splitter, (0.8, 0.2) if stacked else (0.78, 0.22)),
            (self.state_splitter, (0.56, 0.44) if stacked else (0.62, 0.38)),
        ):
            total = sum(splitter.sizes())
            if total > 0:
                splitter.setSizes([round(total * share) for share in shares])

    # -- the window's life: the session ends with it ----------------------------------------------

    def showEvent(self, event) -> None:  # noqa: ANN001 - QShowEvent
        super().showEvent(event)
        if not self._watching_window and self.window() is not self:
            self.window().installEventFilter(self)
            self._watching_window = True

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window() and event.type() == QEvent.Type.Close:
            self.bridge.shutdown()
        return False

    # -- commands -------------------------------------------------------------------------------

    @property
    def function(self) -> str | None:
        """The function Run calls (the workbench's)."""
        return self.workbench.state.function

    @property
    def inputs(self) -> tuple[str, ...]:
        """The inputs Run passes (the workbench's)."""
        return self.workbench.state.inputs

    def set_inputs(self, inputs: tuple[str, ...] | list[str]) -> None:
        self.workbench.set_inputs(tuple(inputs))

    def run(self) -> bool:
        """Run through the window's state, which says why when it cannot."""
        return self.workbench.run(stop_at_entry=False)

    def run_to_entry(self) -> bool:
        return self.workbench.run(stop_at_entry=True)

    def _on_run_started(self, call: Call) -> None:
        self.crash_banner.hide()
        self._retire_failure()
        self.output.appendPlainText(f"$ {call.function} {format_inputs_line(call.inputs)}".rstrip())
        # The new run's line in view: a pane left scrolled into the last run's results showed them as if
        # they were this run's (SqueezeNet walk: a NaN run paused at #0 under the last run's 1,000 numbers).
        bar = self.output.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _on_run_refused(self, why: str) -> None:
        self.status_label.setText(why)
        self.status_label.setToolTip(why)

    def rerun(self) -> None:
        self.crash_banner.hide()
        call = self.bridge.last_call
        if call is not None:
            self.output.appendPlainText(
                f"$ {call.function} {format_inputs_line(call.inputs)}  (rerun)".rstrip()
            )
        self.bridge.rerun()

    def run_to_cursor(self) -> None:
        pc = self.listing.cursor_pc()
        if self._in_called_module("Run to Cursor"):
            return
        if pc is not None and self.shown_function:
            self.bridge.run_to(self.shown_function, pc)

    def toggle_breakpoint_at_cursor(self) -> bool | None:
        """F9: toggle the instruction breakpoint of the cursor's line (or of the current pc)."""
        pc = self.listing.cursor_pc()
        if pc is None:
            pc = self.listing.current_pc
        return self.toggle_breakpoint(pc)

    def toggle_breakpoint(self, pc: int | None) -> bool | None:
        if pc is None or not self.shown_function or self._in_called_module("An instruction breakpoint"):
            return None
        return self.bridge.toggle_instruction_breakpoint(self.shown_function, pc)

    def _in_called_module(self, what: str) -> bool:
        """Whether the listing shows a function of a module the program calls (said in the status line, for
        ``what``): instruction breakpoints and Run to Cursor are the open module's."""
        if self.shown_module is None:
            return False
        main = getattr(self.vmfb, "name", None)
        self.status_label.setText(
            f"{what} is set in @{main}'s own functions: @{self.shown_module}.{self.shown_function} is in a "
            f"module it calls (a function breakpoint on {self.shown_module}.{self.shown_function} stops there)"
        )
        return True

    def _on_margin_clicked(self, line: int) -> None:
        self.toggle_breakpoint(self.listing.pc_of_line(line))

    def select_frame(self, index: int) -> None:
        """Show frame ``index`` of the stop (0 = outermost): its code, its pc, its registers."""
        stop = self.workbench.state.stop
        if stop is None or not 0 <= index < len(stop.location.frames):
            return
        self.selected_frame = index
        frames = stop.location.frames
        frame = frames[index]
        innermost = index == len(frames) - 1
        self._show_function(frame.function, self._frame_ordinal(stop, index), frame.module)
        # A caller's saved pc is its return address; debuggers mark the call it waits on instead.
        pc = frame.pc if innermost else self.listing.instruction_before(frame.pc)
        self.listing.set_current(pc, innermost)
        if innermost:
            self.registers.set_registers(stop.detail.registers, compare=True)
        else:
            self.bridge.evaluate(ReadRegisters(index))
        self.context.set_position(function=frame.function, pc=frame.pc)

    def _ask_stop_limit(self) -> None:
        value, ok = QInputDialog.getDouble(
            self,
            "Stop limit",
            "Seconds Stop waits for a pause before killing the run:",
            self.bridge.stop_timeout,
            0.1,
            600,
            1,
        )
        if ok:
            self.bridge.set_stop_timeout(value)

    def _ask_hang_limit(self) -> None:
        value, ok = QInputDialog.getDouble(
            self,
            "Hang limit",
            "Kill a run that sends nothing for this many seconds (0 = never; applies from the next session start):",
            self.bridge.hang_timeout or 0.0,
            0.0,
            3600,
            1,
        )
        if ok:
            self.bridge.set_hang_timeout(value)

    # -- restoring ------------------------------------------------------------------------------

    def _offer_restore(self, saved) -> None:
        self._saved = saved
        what = Path(saved.source_path or saved.module_path or "").name or "no module"
        parts = [what]
        if saved.breakpoints:
            parts.append(f"{len(saved.breakpoints)} breakpoint{'s' if len(saved.breakpoints) != 1 else ''}")
        if saved.function:
            parts.append(f"last run: {saved.function}")
        self.restore_label.setText("Restore the last debug session? " + " · ".join(parts))
        self.restore_banner.show()

    def restore_last_session(self) -> bool:
        """Take back the saved breakpoints, function, inputs and reopen the saved module. False if none."""
        saved = getattr(self, "_saved", None) or self.bridge.saved_session()
        self.restore_banner.hide()
        if saved is None:
            return False
        self.bridge.restore_setup(saved)
        if saved.parameters:  # the archives its weights load from: before it opens
            self.bridge.set_parameters(saved.parameters)
        if saved.executable_plugins:  # what its kernels import functions from: before it opens
            self.bridge.add_executable_plugins(saved.executable_plugins)
        if saved.inputs:
            self.set_inputs(saved.inputs)
        path = next((p for p in (saved.source_path, saved.module_path) if p and Path(p).exists()), None)
        if path is not None:
            self._pending_restore = saved
            self.services.open_file(path)
        elif saved.module_path:
            self.services.messages.warning(f"the last session's module is gone: {saved.module_path}")
        return True

    # -- events ---------------------------------------------------------------------------------

    def reset_for_module(self, _loaded: LoadedModule | None = None) -> None:
        """A new module: nothing of the previous one's run stays (results, registers, frames, banners)."""
        self.output.clear()
        self.registers.set_registers(None, compare=False)
        self.call_stack.set_frames(())
        self.globals_view.forget_module()
        self.listing.set_current(None)
        self.crash_banner.hide()
        self._retire_failure()
        mismatch = self.workbench.state.mismatch
        self.status_label.setText("Opening…" if mismatch is None else f"Not opened: {mismatch.describe()}")
        self.shown_function = self.shown_ordinal = self.shown_module = None
        if self._pending_restore is None:
            self.restore_banner.hide()  # the user opened a module: the offer to restore another is moot

    def _on_workbench(self, _state=None) -> None:
        """Redraw the run bar from the workbench's state (always its latest: a view may have changed it
        while the others were being told)."""
        state = self.workbench.state
        remote = self.bridge.remote
        self.device_label.setText(f"on {state.device}" + (" on the server" if remote else ""))
        self.device_label.setToolTip(
            f"Runs use {state.device} (the Device panel changes it)"
            + (f", in the session of the server {remote}" if remote else ", in a session on this machine")
        )
        self._rendering = True
        try:
            if state.functions != self._shown_functions:
                self._shown_functions = state.functions
                self.function_combo.clear()
                self.function_combo.addItems(list(state.functions))
            if state.function and self.function_combo.findText(state.function) < 0:
                self.function_combo.addItem(state.function)
            self.function_combo.setCurrentIndex(self.function_combo.findText(state.function or ""))
            if parse_inputs_line(self.inputs_edit.text()) != state.inputs:
                self.inputs_edit.setText(format_inputs_line(state.inputs))
        finally:
            self._rendering = False
        if state.function != self._chosen:
            self._on_function_chosen(state.function or "")

    def _on_function_edited(self, name: str) -> None:
        if not self._rendering:
            self.workbench.set_function(name or None)

    def _on_inputs_edited(self, text: str) -> None:
        if not self._rendering:
            self.workbench.set_inputs(parse_inputs_line(text))

    def debug_initializer(self) -> None:
        """Open the module again with its initializer left to a call, and offer that call (``Open.initializer``)."""
        self.bridge.debug_initializer()
        self.workbench.set_function(INITIALIZER)
        self.services.messages.info(
            f"the module opened again with its initializer left to a call: run {INITIALIZER} (its dispatches stop "
            "like a call's), then the other functions"
        )

    def _on_module(self, loaded: LoadedModule | None) -> None:
        self._listings.clear()
        self._linked = None  # the modules it calls: found when a stop is in one of them
        self._loaded = loaded
        self._session_names = None
        self.vmfb = loaded.module if loaded is not None else None
        exports = getattr(self.vmfb, "exports", None) or []
        self.debug_initializer_action.setEnabled(any(e.name == INITIALIZER for e in exports))
        if loaded is None:
            return
        names = []
        try:
            names = [imp.full_name for imp in self.vmfb.imports]
        except Exception:  # a module without readable imports still runs; completion just has none
            pass
        self.breakpoints_view.set_names(names, [f.name for f in getattr(self.vmfb, "functions", [])])
        if self.standalone and loaded is not self.workbench.module:
            self.workbench.open_module(loaded)  # a panel on its own: its own state opens the module
        self.shown_function = self.shown_ordinal = self.shown_module = None
        self._on_function_chosen(self.workbench.state.function or "")

    def _on_opened(self, event: Opened) -> None:
        self._pending_restore = None
        note = event.initializer_note("Run > Debug the Initializer")
        if note:
            self.services.messages.info(note)
        self._on_function_chosen(self.workbench.state.function or "")

    def _on_function_chosen(self, name: str) -> None:
        """Show the chosen function's code while no run is paused somewhere else."""
        self._chosen = name or None
        if name and self.bridge.state in ("idle", "starting", "closed") and self.vmfb is not None:
            self._show_function(name)
            self.listing.set_current(None)
            cconv = self._cconv(name)
            self.inputs_edit.setToolTip(f"{name}: calling convention {cconv}" if cconv else "")

    def _retire_failure(self) -> None:
        """The window's banner stops saying "the run failed" once the program is elsewhere (stepped back into
        its history, run again, another module): it read as the present. The Log keeps the message."""
        if self._failure_message is not None:
            self.services.messages.retire(self._failure_message)
            self._failure_message = None

    def _on_stopped(self, event: Stopped) -> None:
        self._retire_failure()
        frames = event.location.frames
        self.call_stack.set_frames(frames, event.location.dispatch)
        if frames:
            self.select_frame(len(frames) - 1)
        self.bridge.evaluate(ReadGlobals())
        text = self.reverse.describe_stop(event, self._describe_stop(event))
        self.status_label.setText(text)
        self.status_label.setToolTip(text)
        self.workbench.set_stop_text(text)
        self._raise_dock()

    def _on_finished(self, event: Finished) -> None:
        self._retire_failure()
        self.listing.set_current(None)
        self.call_stack.set_frames(())
        self.output.appendPlainText(event.results_text.rstrip() or f"{event.function}: no results")
        self.status_label.setText(f"Finished {event.function}  (recorded: Ctrl+Shift+F11 steps back, or click the timeline)")
        self.bridge.evaluate(ReadGlobals())  # what the call left in the module's state (the next call starts there)

    def _on_failed(self, event: Failed) -> None:
        refused = self.bridge.state == "stopped" or (self.bridge.state == "idle" and self.bridge.can_reverse)
        if refused and not self.bridge.ended_the_call(event):
            # A reverse command or query that cannot be done: the program is where it was.
            self.output.appendPlainText(f"not done: {event.message}")
            self.status_label.setText(f"Not done: {event.message.splitlines()[0] if event.message else ''}")
            return
        where = f" at {event.location.describe()}" if event.location.frames else ""
        text = f"error{' ' + event.status if event.status else ''}{where}: {event.message}"
        self.output.appendPlainText(text)
        frames = event.location.frames
        if frames:  # where it failed, as a stop shows a place: its frames, its code, its registers
            self.call_stack.set_frames(frames, event.location.dispatch)
            failing = frames[-1]
            self._show_function(failing.function, failing.ordinal, failing.module)
            self.listing.set_current(failing.pc, True)
            self.bridge.evaluate(ReadRegisters(-1))
        first = event.message.splitlines()[0] if event.message else ""
        if NO_ARCHIVE in first:  # the program's weights are in an archive: where the window takes one
            first += " (here: File > Parameter Archive...)"
        elif NO_PLUGIN in first:  # its kernels import functions: where the window takes the plugin
            first += " (here: File > Executable Plugin...)"
        self.status_label.setText(f"Failed: {first}")
        self._failure_message = self.services.messages.error(f"the run failed: {first}")

    def _on_crashed(self, event: Crashed) -> None:
        if self.bridge.stop_requested:  # the user's Stop ended a run that did not pause in time: not a crash
            where = event.location.dispatch
            text = (
                "Stopped: the run did not pause"
                + (f" (in dispatch #{event.location.dispatch_index} {where})" if where else "")
                + ", so its session was ended and started again (Rerun repeats the call)"
            )
            self.output.appendPlainText(text)
            self.listing.set_current(None)
            self.call_stack.set_frames(())
            self.status_label.setText(text)
            self.status_label.setToolTip(self.bridge.crash_report)
            self.workbench.say(text)
            return
        report = self.bridge.crash_report
        self.crash_label.setText(report)
        self.crash_banner.show()
        self.output.appendPlainText(report)
        self.listing.set_current(None)
        self.call_stack.set_frames(())
        self.status_label.setText("Crashed; session restarted")
        self.services.messages.error(report.splitlines()[0], report)
        self._raise_dock()

    def _on_answer(self, answer: Answer) -> None:
        if isinstance(answer, Globals):
            self.globals_view.set_globals(answer)
            self._name_listing(answer)
        elif isinstance(answer, GlobalBuffer):
            self._show_global_buffer(answer)
        elif isinstance(answer, Registers):
            self.registers.set_registers(answer.registers, compare=False)

    def _global_names(self) -> GlobalNames | None:
        """What names the listing's global accesses: the phases beside the module, else the session's."""
        beside = self._loaded.global_names if self._loaded is not None else None
        return beside if beside is not None and beside.globals else self._session_names

    def _name_listing(self, answer: Globals) -> None:
        """The session named the globals where the module's folder could not (a rebuild's phases came): the
        listing shown is drawn again with them, where it was (its current line and scroll kept)."""
        if not answer.variables or self._global_names() is not None:
            return
        named = tuple(NamedGlobal(v.name, v.kind, v.index, "") for v in answer.variables)
        self._session_names = GlobalNames(named, answer.names_note)
        self._listings.clear()
        if self.shown_function is None or self.shown_ordinal is None or self.shown_module is not None:
            return
        function = self._function_object(self.shown_function, self.shown_ordinal)
        if function is not None:
            self.listing.replace_text(self._listing_of(function))

    def _listing_of(self, function, vmfb=None) -> list:
        """The listing of ``function`` of the open module (or of ``vmfb``, a module it calls), made once per
        module and names; the open module's global accesses named."""
        from app.engine_adapter import function_listing

        vmfb = vmfb or self.vmfb
        key = (vmfb.name, function.ordinal)
        lines = self._listings.get(key)
        if lines is None:
            names = self._global_names() if vmfb is self.vmfb else None
            lines = self._listings[key] = function_listing(vmfb, function, names)
        return lines

    def _on_sources_settled(self) -> None:
        """A rebuild of the program ended: its phase snapshots may name the globals the module's folder did
        not, so unnamed globals are asked for again."""
        shown = self.globals_view.value
        if shown is not None and not shown.variables:
            self.bridge.evaluate(ReadGlobals())  # not sent while a run goes on; its next stop asks anyway

    def _show_global_buffer(self, answer: GlobalBuffer) -> None:
        """A buffer global's bytes now, in the tensor inspector (typed when the program declares its tensor;
        bytes otherwise, which the inspector's Type box can read as a type)."""
        from app.views.tensor_inspector import InspectedTensor, TensorInspector

        inspector = TensorInspector()
        inspector.setObjectName("globalInspector")
        where = self.status_label.text().split("  ")[0]  # the moment: "Finished main", "Stopped at ..."
        tensor = answer.tensor
        typed = tensor.element_type not in ("", "u8")
        type_text = format_shape_and_type(tensor.shape, tensor.element_type) if typed else ""
        inspector.set_tensors([InspectedTensor(f"@{answer.name} ({where})", tensor.to_numpy(), type_text)])
        inspector.ask_about_elements(f"When did @{answer.name}[{{}}] change?  (run back to the last write)")
        inspector.elementQuestioned.connect(
            lambda index, i=inspector, a=answer: self._ask_about_global_element(a, i, index)
        )
        self.services.open_document(inspector, f"@{answer.name}")
        self.services.messages.info(f"@{answer.name}: {answer.type_note} ({where})")

    def _ask_about_global_element(self, answer: GlobalBuffer, inspector, index: tuple[int, ...]) -> None:
        """"When did @state[1] change?" from a buffer global's inspector: its bytes in the buffer the global
        holds (as the inspector types them now), searched back from the run's position."""
        name = f"@{answer.name}[{', '.join(str(i) for i in index)}]"
        place = inspector.element_place(index)
        module = getattr(self.vmfb, "name", None)
        if place is None or module is None:
            self.status_label.setText(f"When did {name} change? needs the element's own bytes (not unpacked ones)")
            return
        offset, length, element = place
        self.reverse.when_changed(WatchGlobalContents(module, answer.query.ordinal, offset, length, element), name)

    def _on_progress(self, progress) -> None:
        """What a long run is doing (a few times a second): the dispatch it runs."""
        location = progress.location
        if self.bridge.state == "running" and location.dispatch:
            self.running_status.reported(f"#{location.dispatch_index} {location.dispatch}")

    def _on_state(self, state: str) -> None:
        stopped = state == "stopped"
        for action in (
            self.continue_action,
            self.step_over_action,
            self.step_into_action,
            self.step_out_action,
            self.next_dispatch_action,
            self.run_to_cursor_action,
        ):
            action.setEnabled(stopped)
        self.stop_action.setEnabled(state == "running")
        if hasattr(self, "reverse"):
            self.reverse.update_enabled()
        can_start = state in ("idle", "stopped")
        self.run_button.setEnabled(can_start)
        self.entry_button.setEnabled(can_start)
        if state == "running":
            self.running_status.running()  # "Running…", the last dispatch reported and how long ago
            return
        self.running_status.ended()
        text = {"closed": "No module open", "starting": "Starting the session…", "idle": "Ready"}.get(state)
        if text is not None:
            self.status_label.setText(text)

    def _on_breakpoints(self, breakpoints: tuple[Breakpoint, ...]) -> None:
        self.breakpoints_view.set_breakpoints(breakpoints)
        self._refresh_margin()

    def _show_breakpoint(self, bp: Breakpoint) -> None:
        if bp is not None and bp.kind in ("instruction", "function") and bp.function:
            self._show_function(bp.function)
            if bp.pc is not None:
                line = self.listing.line_of_pc(bp.pc)
                if line is not None:
                    self.listing.setTextCursor(self.listing.textCursor())
                    self.listing.verticalScrollBar().setValue(max(0, line - 4))

    # -- helpers --------------------------------------------------------------------------------

    def _describe_stop(self, event: Stopped) -> str:
        reason = {
            "entry": "at entry",
            "step": "after a step",
            "breakpoint": "at a breakpoint",
            "paused": "paused",
            "dispatch": "at a dispatch",
            "history-start": "at the start of the history",
        }
        text = f"Stopped {reason.get(event.reason, event.reason)}"
        info = event.location.dispatch_info
        if info is not None:
            text += f" ({info.when} #{info.ordinal} {info.export})"
            if event.detail.nonfinite:
                text += ", " + "; ".join(n.describe() for n in event.detail.nonfinite)
            elif event.detail.nan_bindings:
                text += f", NaN/Inf written to bindings {list(event.detail.nan_bindings)}"
            divergence = event.detail.divergence
            if divergence is not None:
                text += f", diverged: {divergence.text or divergence.summary or divergence.name}"
        if event.location.frames:
            text += f" — {event.location.function_name} pc {event.location.frames[-1].pc:#x}"
        hits = event.detail.breakpoints
        if info is not None:  # "before dispatch #4" says again what "(before #4 ...)" said
            hits = tuple(h for h in hits if h != f"{info.when} dispatch #{info.ordinal}")
        if hits:
            text += f" [{', '.join(hits)}]"
        return text

    @staticmethod
    def _frame_ordinal(stop: Stopped, index: int) -> int | None:
        frames = stop.location.frames
        return frames[index].ordinal if 0 <= index < len(frames) else None

    def _function_object(self, name: str, ordinal: int | None, vmfb=None):
        vmfb = vmfb or self.vmfb
        if vmfb is None:
            return None
        functions = vmfb.functions
        if ordinal is not None and 0 <= ordinal < len(functions) and functions[ordinal].name == name:
            return functions[ordinal]
        for export in vmfb.exports:
            if export.name == name:
                return functions[export.internal_ordinal]
        return next((f for f in functions if f.name == name), None)

    def _cconv(self, name: str) -> str:
        function = self._function_object(name, None)
        try:
            return function.signature.calling_convention if function is not None else ""
        except Exception:
            return ""

    def _show_function(self, name: str, ordinal: int | None = None, module: str | None = None) -> None:
        main = getattr(self.vmfb, "name", None)
        vmfb = self._module_named(module)
        function = self._function_object(name, ordinal, vmfb) if vmfb is not None else None
        if function is None:
            self.shown_function, self.shown_ordinal, self.shown_module = name, None, None
            self.function_title.setText(f"{module or main}.{name}: no disassembly (not in the open module)")
            self.listing.set_listing([])
            return
        called = None if vmfb is self.vmfb else vmfb.name  # a function of a module the program calls
        if (self.shown_ordinal, self.shown_function, self.shown_module) == (function.ordinal, name, called):
            return
        lines = self._listing_of(function, vmfb)
        self.shown_function, self.shown_ordinal, self.shown_module = name, function.ordinal, called
        title = f"@{vmfb.name}.{name}   (function #{function.ordinal}, {len(function.code)} bytes)"
        if called is not None:
            title += f"   a module @{main} calls"
        self.function_title.setText(title)
        self.listing.set_listing(lines)
        self._refresh_margin()

    def _module_named(self, name: str | None):
        """The open module (``name`` None or its name), or the compiled module of that name the program
        calls (``engine.runtime.module_dependencies``: given beside it, as the session linked it); None."""
        if name in (None, getattr(self.vmfb, "name", None)):
            return self.vmfb
        return self._linked_modules().get(name)

    def _linked_modules(self) -> dict[str, Any]:
        """The compiled modules the open program calls, by name (found beside it, as the session links them;
        read once per module)."""
        if self._linked is None:
            from engine.errors import LensError
            from engine.runtime.module_dependencies import linked_modules
            from engine.runtime.vmfb.module import open_vmfb

            self._linked = {}
            if self._loaded is not None:
                try:
                    self._linked = {m.name: open_vmfb(m.path) for m in linked_modules(self._loaded.path)}
                except LensError:
                    pass  # the session said why it could not link them
        return self._linked

    def _refresh_margin(self) -> None:
        pcs = {
            bp.pc
            for bp in self.bridge.breakpoints
            if bp.kind == "instruction" and bp.function == self.shown_function and bp.pc is not None
        } if self.shown_module is None else set()  # (breakpoints are set in the open module's functions)
        self.listing.set_breakpoint_pcs(pcs)

    def _raise_dock(self) -> None:
        dock = self.parentWidget()
        while dock is not None and not isinstance(dock, QDockWidget):
            dock = dock.parentWidget()
        if dock is not None and not dock.isVisible():
            dock.show()
        if dock is None:
            return
        dock.raise_()
        # A stop is when the stepper needs room: grow its dock to about half the window once.
        window = dock.parentWidget()
        if isinstance(window, QMainWindow) and not dock.isFloating() and not self._grown:
            self._grown = True
            if dock.height() < window.height() * 0.4:
                window.resizeDocks([dock], [int(window.height() * 0.5)], Qt.Orientation.Vertical)
