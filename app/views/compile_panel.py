"""The compile panel: options, compile (one program or two variants side by side), phases with their
timeline, the IR of a phase, diffs, and the compiler's diagnostics.

Compiles run ``engine.compiler.compile_program`` (which drives ``iree-compile`` in a child process) on a
plain Python thread per job, so two variants compile at once and a cancel kills the compiler at once;
progress and results come back to the GUI thread through queued Qt signals.
"""

from __future__ import annotations

import shlex
import threading
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.views.ir_diff import IrDiffView
from app.views.ir_viewer import IrViewer
from app.views.phase_timeline import PhaseTimeline
from engine.compiler import PHASES, TYPE_CONVERSIONS, Compilation, CompileRequest, Progress, TaskState
from engine.compiler.request import selects_target
from engine.compiler.targets import COMPILE_ONLY_TARGETS, TARGETS
from engine.errors import CompileCancelled

_SETTINGS_GROUP = "compile"
CONVERSION_COLUMNS = 2


class CompileOptionsForm(QWidget):
    """Target, CPU, type conversions, dispatch tracing and free-form IREE flags for one compile."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.target = QComboBox(self)
        self.target.addItems(list(TARGETS))
        # Targets to compile for and read phase by phase (their modules run where such a device is: CUDA, HIP).
        self.target.addItems(list(COMPILE_ONLY_TARGETS))
        self.target_cpu = QLineEdit(self)
        self.target_cpu.setPlaceholderText("host")
        self.conversions = {name: QCheckBox(name, self) for name in TYPE_CONVERSIONS}
        for name, box in self.conversions.items():
            box.setToolTip(f"--iree-input-{name}")
        self.trace = QCheckBox("trace dispatch tensors", self)
        self.trace.setToolTip("--iree-flow-trace-dispatch-tensors")
        self.flags = QLineEdit(self)
        self.flags.setPlaceholderText("extra iree-compile flags, e.g. --iree-opt-level=O3")
        conv_box = QWidget(self)
        conv = QGridLayout(conv_box)
        conv.setContentsMargins(0, 0, 0, 0)
        # Two columns with their full labels: each box keeps its size hint (a 3-column row was cut to
        # "demote-f32-to..." in a 1366-px window).
        for k, box in enumerate(self.conversions.values()):
            conv.addWidget(box, k // CONVERSION_COLUMNS, k % CONVERSION_COLUMNS)
        conv.setColumnStretch(CONVERSION_COLUMNS, 1)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Target", self.target)
        form.addRow("Target CPU", self.target_cpu)
        form.addRow("Types", conv_box)
        form.addRow("", self.trace)
        form.addRow("Flags", self.flags)
        self.target.currentTextChanged.connect(lambda t: self.target_cpu.setEnabled(t == "llvm-cpu"))

    def request(self, source: Path | str) -> CompileRequest:
        """The request for ``source`` with these options (raises ValueError on bad flags or options)."""
        target = self.target.currentText()
        cpu = self.target_cpu.text().strip() or None
        extra_flags = tuple(shlex.split(self.flags.text()))
        # IREE's own target flags in the Flags field replace the Target choice (and its CPU).
        own_target = selects_target(extra_flags)
        return CompileRequest.from_file(
            source,
            target=target,
            target_cpu=cpu if target == "llvm-cpu" and not own_target else None,
            type_conversions=tuple(n for n, b in self.conversions.items() if b.isChecked()),
            trace_dispatch_tensors=self.trace.isChecked(),
            extra_flags=extra_flags,
        )

    def describe(self) -> str:
        parts = [self.target.currentText()]
        if self.target_cpu.isEnabled() and self.target_cpu.text().strip():
            parts.append(self.target_cpu.text().strip())
        parts += [n for n, b in self.conversions.items() if b.isChecked()]
        if self.trace.isChecked():
            parts.append("traced")
        if self.flags.text().strip():
            parts.append(self.flags.text().strip())
        return " ".join(parts)

    def save(self, store: QSettings, prefix: str) -> None:
        store.setValue(f"{prefix}/target", self.target.currentText())
        store.setValue(f"{prefix}/target_cpu", self.target_cpu.text())
        store.setValue(
            f"{prefix}/conversions", ",".join(n for n, b in self.conversions.items() if b.isChecked())
        )
        store.setValue(f"{prefix}/trace", "1" if self.trace.isChecked() else "0")
        store.setValue(f"{prefix}/flags", self.flags.text())

    def load(self, store: QSettings, prefix: str) -> None:
        target = str(store.value(f"{prefix}/target", "") or "")
        if target in TARGETS or target in COMPILE_ONLY_TARGETS:
            self.target.setCurrentText(target)
        self.target_cpu.setText(str(store.value(f"{prefix}/target_cpu", "") or ""))
        chosen = set(str(store.value(f"{prefix}/conversions", "") or "").split(","))
        for name, box in self.conversions.items():
            box.setChecked(name in chosen)
        self.trace.setChecked(str(store.value(f"{prefix}/trace", "0")) == "1")
        self.flags.setText(str(store.value(f"{prefix}/flags", "") or ""))


class CompileRunner(QObject):
    """Runs one compile on a thread; signals arrive on the thread that owns the runner (the GUI's)."""

    progressed = Signal(object)  # engine.compiler.Progress
    finished = Signal(object)  # Compilation
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, request: CompileRequest, label: str, parent: QObject | None = None):
        super().__init__(parent)
        self.request = request
        self.label = label
        self.task = TaskState(on_progress=self.progressed.emit)
        self._thread = threading.Thread(target=self._run, name=f"compile {label}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        self.task.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        from engine.compiler import compile_program

        try:
            result = compile_program(self.request, task=self.task)
        except CompileCancelled:
            self.cancelled.emit()
        except Exception as exc:  # a job's failure is reported, never raised into Qt
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.finished.emit(result)


class CompilePanel(QWidget):
    """Compile a program and explore the result: phases, timeline, IR, diffs and diagnostics.

    ``services`` is the main window's ``PanelServices`` (optional: the panel works standalone);
    ``settings`` the QSettings the options are saved in (the app's settings file by default).
    """

    compilationFinished = Signal(object)  # Compilation
    phaseShown = Signal(str)  # phase whose IR the viewer shows

    def __init__(self, services=None, settings: QSettings | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.services = services
        if settings is None:
            from app.settings import open_settings

            settings = open_settings()
        self.settings = settings
        self.compilations: list[tuple[str, Compilation]] = []
        self.current: Compilation | None = None
        self._runners: list[CompileRunner] = []
        self._pair: dict[CompileRunner, Compilation | None] = {}
        self.shown_phase: str | None = None
        top = self._build_options()
        left = self._build_results()
        self._lay_out(top, left)
        self._connect(services)
        self.load_settings()

    def _build_options(self) -> QWidget:
        """The source, the two option forms and the buttons: the panel's top section."""
        self.source = QLineEdit(self)
        self.source.setPlaceholderText("program to compile (.mlir / .mlirbc)")
        browse = QPushButton("…", self)
        browse.clicked.connect(self._browse)
        self.options = CompileOptionsForm(self)
        self.variant_b = CompileOptionsForm(self)
        self.compile_button = QPushButton("Compile", self)
        self.compile_two_button = QPushButton("Compile two variants", self)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        # The result, run and debugged in one action: it becomes the window's current module.
        self.debug_button = QPushButton("Debug this", self)
        self.debug_button.setObjectName("compileDebugThis")
        self.debug_button.setToolTip("Open the compiled module in the debugger (VM Stepper, Run, breakpoints)")
        self.debug_button.setEnabled(False)
        self.debug_button.clicked.connect(self.debug_current)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, len(PHASES))
        self.progress.setFormat("idle")
        self.progress.setValue(0)
        # The options fold away once a compilation is shown (its phases, timeline and IR want the room: at 1366x768
        # they were below the panel's fold); the button says the options set and shows them again.
        self.options_button = QToolButton(self)
        self.options_button.setObjectName("compileOptionsToggle")
        self.options_button.setCheckable(True)
        self.options_button.setChecked(True)
        self.options_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.options_button.toggled.connect(self.show_options)
        src_row = QHBoxLayout()
        src_row.addWidget(QLabel("Source", self))
        src_row.addWidget(self.source, 1)
        src_row.addWidget(browse)
        src_row.addWidget(self.options_button)  # beside the source's stretch: the buttons' row has no room at 1366
        btn_row = QHBoxLayout()
        btn_row.addWidget(self.compile_button)
        btn_row.addWidget(self.compile_two_button)
        btn_row.addWidget(self.cancel_button)
        btn_row.addWidget(self.debug_button)
        btn_row.addWidget(self.progress, 1)
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.status.hide()  # until there is something to say
        top = QWidget(self)
        tv = QVBoxLayout(top)
        tv.setContentsMargins(0, 0, 0, 0)
        tv.addLayout(src_row)
        # The two option forms as tabs (side by side they needed more than a 1366-px window's document area).
        self.options_tabs = QTabWidget(self)
        self.options_tabs.setObjectName("compileOptionsTabs")
        self.options_tabs.setDocumentMode(True)
        self.options_tabs.addTab(self.options, "Options")
        self.options_tabs.addTab(self.variant_b, "Variant B (for “Compile two variants”)")
        tv.addWidget(self.options_tabs)
        tv.addLayout(btn_row)
        self._label_options()
        tv.addWidget(self.status)
        return top

    def show_options(self, shown: bool = True) -> None:
        """Show (or fold away) the option forms; the toggle button follows."""
        if self.options_button.isChecked() != shown:
            self.options_button.setChecked(shown)  # comes back here through ``toggled``
            return
        self.options_tabs.setVisible(shown)
        self._label_options()

    def _label_options(self) -> None:
        shown = self.options_button.isChecked()
        text = ("▾ " if shown else "▸ ") + ("Options" if shown else f"Options: {self.options.describe()}")
        # Elided to a width (long flags would widen the panel past a 1366-px window's document), whole in the tip.
        self.options_button.setText(self.options_button.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, 240))
        self.options_button.setToolTip(f"{text[2:]}\nShow or hide the compile options (target, types, flags, variant B)")

    def _build_results(self) -> QWidget:
        """The compilations, their phases and diagnostics (returned: the left column), the timeline and the
        IR / diff / builds tabs."""
        self.compilation_box = QComboBox(self)
        self.other_box = QComboBox(self)
        self.phase_list = QListWidget(self)
        self.phase_list.setSelectionMode(QListWidget.SelectionMode.ExtendedSelection)
        self.diff_phases_button = QPushButton("Diff selected phases", self)
        self.diff_other_button = QPushButton("Diff with", self)
        self.diagnostics = QListWidget(self)
        self.timeline = PhaseTimeline(self)
        self.viewer = IrViewer(self)
        self.diff_view = IrDiffView(self)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.viewer, "IR")
        self.tabs.addTab(self.diff_view, "Diff")
        from app.views.build_compare_table import BuildCompareTable

        self.builds_view = BuildCompareTable(self)  # beside the A/B phase diff: time by source line, A vs B
        self.tabs.addTab(self.builds_view, "Builds A/B")
        self.compare_builds_button = QPushButton("Compare builds", self)
        self.compare_builds_button.setToolTip(
            "Profile this compilation (A) and the one chosen beside “Diff with” (B) with the run's function and "
            "inputs: time, code size and outputs by source line"
        )
        left = QWidget(self)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(QLabel("Compilation", self))
        lv.addWidget(self.compilation_box)
        lv.addWidget(QLabel("Phases (select two to diff)", self))
        lv.addWidget(self.phase_list, 2)
        lv.addWidget(self.diff_phases_button)
        other_row = QHBoxLayout()
        other_row.addWidget(self.diff_other_button)
        other_row.addWidget(self.other_box, 1)
        lv.addLayout(other_row)
        lv.addWidget(self.compare_builds_button)
        # Shown when the compilation has diagnostics: empty, they took a third of the column from the phases.
        self.diagnostics_label = QLabel("Diagnostics", self)
        lv.addWidget(self.diagnostics_label)
        lv.addWidget(self.diagnostics, 1)
        self._show_diagnostics()
        return left

    def _lay_out(self, top: QWidget, left: QWidget) -> None:
        main_split = QSplitter(Qt.Orientation.Horizontal, self)
        main_split.addWidget(left)
        main_split.addWidget(self.tabs)
        main_split.setStretchFactor(1, 3)
        vsplit = QSplitter(Qt.Orientation.Vertical, self)
        vsplit.addWidget(top)
        vsplit.addWidget(self.timeline)
        vsplit.addWidget(main_split)
        vsplit.setStretchFactor(2, 3)
        # inside a scroll area, so that a small dock does not force its minimum size on the window
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(vsplit)
        # No fixed minimum size (a fixed 640x560 squeezed the options below their size hints): the sections'
        # own minimums, with room for the timeline and the IR; in a smaller dock the scroll area scrolls.
        vsplit.setChildrenCollapsible(False)
        self.timeline.setMinimumHeight(150)  # a summary of up to three lines, and rows a label fits in
        # The phase column's own minimum (its list scrolls): with more, a 1366x768 window's compile dock cut
        # off "Diff with" and "Compare builds" below the fold of its scroll area.
        main_split.setMinimumHeight(230)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(scroll)

    def _connect(self, services) -> None:
        self.compile_button.clicked.connect(lambda: self.compile())
        self.compile_two_button.clicked.connect(lambda: self.compile_two_variants())
        self.cancel_button.clicked.connect(self.cancel)
        self.compilation_box.currentIndexChanged.connect(self._compilation_chosen)
        self.phase_list.itemClicked.connect(lambda it: self.show_phase(it.data(Qt.ItemDataRole.UserRole)))
        self.timeline.phaseClicked.connect(self.show_phase)
        self.diff_phases_button.clicked.connect(self.diff_selected_phases)
        self.diff_other_button.clicked.connect(self.diff_with_other)
        self.compare_builds_button.clicked.connect(lambda: self.compare_builds_with_other())
        self.diagnostics.itemActivated.connect(self._diagnostic_clicked)
        self.diagnostics.itemClicked.connect(self._diagnostic_clicked)
        if services is not None:
            services.context.phaseChanged.connect(
                lambda ph: ph and ph != self.shown_phase and self.current and self.show_phase(ph)
            )
            services.context.moduleChanged.connect(self._module_changed)
            self._module_changed(services.context.module)
            # A dispatch picked anywhere (by IREE's name) moves the IR to its line (dispatch panel).
            services.context.dispatchChanged.connect(self.show_dispatch)
            self.phaseShown.connect(
                lambda _ph: self.show_dispatch(services.context.dispatch, switch_phase=False)
            )

    # -- settings ---------------------------------------------------------------------------------------
    def load_settings(self) -> None:
        self.options.load(self.settings, f"{_SETTINGS_GROUP}/a")
        self.variant_b.load(self.settings, f"{_SETTINGS_GROUP}/b")
        if not self.source.text():
            self.source.setText(str(self.settings.value(f"{_SETTINGS_GROUP}/source", "") or ""))

    def save_settings(self) -> None:
        self.options.save(self.settings, f"{_SETTINGS_GROUP}/a")
        self.variant_b.save(self.settings, f"{_SETTINGS_GROUP}/b")
        self.settings.setValue(f"{_SETTINGS_GROUP}/source", self.source.text())
        self.settings.sync()

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Program to compile", "", "MLIR (*.mlir *.mlirbc);;All (*)"
        )
        if path:
            self.source.setText(path)

    def _module_changed(self, module) -> None:
        # a module opened from (or compiled from) an .mlir makes that program the one to compile
        source = getattr(module, "source", None)
        if source is not None:
            self.source.setText(str(source))

    def set_source(self, path: str | Path) -> None:
        self.source.setText(str(path))

    # -- compiling --------------------------------------------------------------------------------------
    def compile(self) -> list[CompileRunner]:
        """Compile the source with the main options; returns the started runner (empty on bad input)."""
        return self._start([(self.options, self.options.describe())])

    def compile_two_variants(self) -> list[CompileRunner]:
        """Compile the source with the main options and with variant B at the same time; when both are
        done the diff tab shows the same phase of the two."""
        runners = self._start([(self.options, "A: " + self.options.describe()),
                               (self.variant_b, "B: " + self.variant_b.describe())])  # fmt: skip
        if len(runners) == 2:
            self._pair = {r: None for r in runners}
        return runners

    def _start(self, forms) -> list[CompileRunner]:
        source = self.source.text().strip()
        if not source:
            self._set_status("choose a program to compile first")
            return []
        try:
            requests = [(form.request(Path(source)), label) for form, label in forms]
        except (ValueError, FileNotFoundError, TypeError) as exc:
            self._set_status(f"cannot compile: {exc}")
            return []
        self.save_settings()
        self._pair = {}
        runners = []
        for request, label in requests:
            r = CompileRunner(request, label, self)
            r.progressed.connect(lambda p, r=r: self._on_progress(r, p))
            r.finished.connect(lambda c, r=r: self._on_finished(r, c))
            r.failed.connect(lambda msg, r=r: self._on_ended(r, f"{r.label}: {msg}"))
            r.cancelled.connect(lambda r=r: self._on_ended(r, f"{r.label}: cancelled"))
            self._runners.append(r)
            runners.append(r)
        self.progress.setValue(0)
        self.progress.setFormat("starting…")
        self._update_buttons()
        for r in runners:
            r.start()
        return runners

    def cancel(self) -> None:
        for r in list(self._runners):
            r.cancel()

    def is_busy(self) -> bool:
        return bool(self._runners)

    def _update_buttons(self) -> None:
        busy = self.is_busy()
        self.compile_button.setEnabled(not busy)
        self.compile_two_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)

    def _on_progress(self, runner: CompileRunner, p: Progress) -> None:
        self.progress.setValue(p.phase_index)
        self.progress.setFormat(f"{runner.label}: {p.phase or 'starting'} ({p.phase_index}/{p.phases_total})")

    def _on_ended(self, runner: CompileRunner, message: str) -> None:
        if runner in self._runners:
            self._runners.remove(runner)
        self._set_status(message)
        if not self._runners:
            self.progress.setFormat("idle" if "cancelled" not in message else "cancelled")
        self._update_buttons()

    def _on_finished(self, runner: CompileRunner, compilation: Compilation) -> None:
        if runner in self._runners:
            self._runners.remove(runner)
        self.add_compilation(compilation, runner.label)
        ok = "compiled" if compilation.ok else f"FAILED ({len(compilation.errors)} errors)"
        self._set_status(f"{runner.label}: {ok} in {compilation.elapsed_s:.2f} s")
        if not self._runners:
            self.progress.setValue(len(PHASES) if compilation.ok else self.progress.value())
            self.progress.setFormat("done" if compilation.ok else "failed")
        pair = self._pair
        if runner in pair:
            pair[runner] = compilation
            if all(c is not None for c in pair.values()):
                a, b = list(pair.values())
                self.diff_compilations(a, b, self._common_phase(a, b))
        self._update_buttons()
        self.compilationFinished.emit(compilation)

    @staticmethod
    def _common_phase(a: Compilation, b: Compilation) -> str | None:
        names_b = {p.phase for p in b.phases}
        common = [p.phase for p in a.phases if p.phase in names_b]
        for preferred in ("executable-targets", "hal", "vm"):
            if preferred in common:
                return preferred
        return common[-1] if common else None

    def _set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))  # empty, its line pushed the phase column's last buttons out of sight
        if self.services is not None and text:
            (
                self.services.messages.error
                if "FAILED" in text or "cannot" in text
                else self.services.messages.info
            )(f"compile: {text}")

    # -- results ----------------------------------------------------------------------------------------
    def add_compilation(self, compilation: Compilation, label: str = "") -> None:
        """Add a finished compilation to the list and show it."""
        label = label or compilation.request.target
        self.compilations.append((label, compilation))
        self.show_options(False)
        for box in (self.compilation_box, self.other_box):
            box.addItem(f"{len(self.compilations)}. {label}")
        self.compilation_box.setCurrentIndex(len(self.compilations) - 1)
        self._compilation_chosen(len(self.compilations) - 1)

    def debug_current(self) -> bool:
        """Debug this: the chosen compilation's module becomes the window's current module."""
        workbench = getattr(self.services, "workbench", None) if self.services is not None else None
        if workbench is None:
            self._set_status("cannot debug from here: this panel is not in the main window")
            return False
        return workbench.debug_compilation(self.current)

    def _compilation_chosen(self, index: int) -> None:
        if not 0 <= index < len(self.compilations):
            return
        label, comp = self.compilations[index]
        self.current = comp
        self.debug_button.setEnabled(bool(comp.ok and comp.vmfb_path is not None))
        if self.services is not None:
            self.services.context.set_compilation(comp)
        self.phase_list.clear()
        for snap in comp.phases:
            item = QListWidgetItem(
                f"{snap.index:2d}. {snap.phase}" + ("" if snap.origin == "compiled" else f" ({snap.origin})")
            )
            item.setData(Qt.ItemDataRole.UserRole, snap.phase)
            self.phase_list.addItem(item)
        self.diagnostics.clear()
        for d in comp.diagnostics:
            item = QListWidgetItem(str(d))
            item.setData(Qt.ItemDataRole.UserRole, d)
            item.setToolTip(d.context or str(d))
            self.diagnostics.addItem(item)
        self._show_diagnostics()
        if comp.timing is not None:
            compiled = [p.phase for p in comp.phases if p.origin == "compiled"]
            if not comp.ok:
                done = {p.phase for p in comp.phases}
                compiled += [p for p in PHASES if p not in done][:1]  # the phase that failed
            self.timeline.set_timing(comp.timing, compiled)
        else:
            self.timeline.clear()
        if comp.phases:
            self.show_phase(comp.phases[-1].phase)
        if not comp.ok and comp.diagnostics:
            self.diagnostics.setCurrentRow(0)
            self.open_diagnostic(comp.errors[0] if comp.errors else comp.diagnostics[0])

    def _show_diagnostics(self) -> None:
        shown = self.diagnostics.count() > 0
        self.diagnostics_label.setVisible(shown)
        self.diagnostics.setVisible(shown)

    def show_phase(self, phase: str) -> bool:
        """Show the IR of ``phase`` of the current compilation in the viewer; False if it has none."""
        comp = self.current
        if comp is None:
            return False
        try:
            snap = comp.phase(phase)
        except KeyError:
            self._set_status(f"no snapshot of phase {phase}")
            return False
        self.shown_phase = phase
        self.viewer.open_file(snap.path)
        self.tabs.setCurrentWidget(self.viewer)
        self.timeline.set_current_phase(phase)
        for i in range(self.phase_list.count()):
            item = self.phase_list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == phase and not item.isSelected():
                self.phase_list.setCurrentItem(item)
        if self.services is not None:
            self.services.context.set_phase(phase)
        self.phaseShown.emit(phase)
        return True

    def show_dispatch(self, name, switch_phase: bool = True) -> bool:
        """Move the IR viewer to dispatch ``name`` (IREE's name; ints, run ordinals, are ignored): its line
        in the phase shown when it appears there, else (``switch_phase``) in the flow phase. False if the
        dispatch is not found."""
        if not isinstance(name, str) or self.current is None:
            return False
        from engine.compiler.dispatch_index import DispatchIndex

        try:
            dispatch = DispatchIndex.cached(self.current).get(name)
        except KeyError:
            return False
        phase = self.shown_phase
        if phase is None or dispatch.line_in(phase) is None:
            if not switch_phase:
                return False
            phase = next((p for p in ("flow", "stream", "dispatch-creation") if dispatch.line_in(p)), None)
            if phase is None or not self.show_phase(phase):
                return False
        self.viewer.go_to_line(dispatch.line_in(phase) - 1)
        self.tabs.setCurrentWidget(self.viewer)
        return True

    def diff_phases(self, a: str, b: str) -> None:
        comp = self.current
        if comp is None:
            return
        pa, pb = comp.phase(a), comp.phase(b)
        self.diff_view.set_texts(pa.path.read_bytes(), pb.path.read_bytes(), pa.path.name, pb.path.name)
        self.tabs.setCurrentWidget(self.diff_view)
        self.diff_view.next_change()

    def diff_selected_phases(self) -> None:
        chosen = [it.data(Qt.ItemDataRole.UserRole) for it in self.phase_list.selectedItems()]
        if len(chosen) != 2:
            self._set_status("select exactly two phases to diff")
            return
        order = {p: i for i, p in enumerate(PHASES)}
        a, b = sorted(chosen, key=lambda p: order.get(p, 99))
        self.diff_phases(a, b)

    def diff_compilations(self, a: Compilation, b: Compilation, phase: str | None) -> None:
        """Diff the same phase of two compilations (default: the current phase)."""
        if phase is None:
            self._set_status("the two compilations have no phase in common")
            return
        try:
            pa, pb = a.phase(phase), b.phase(phase)
        except KeyError as exc:
            self._set_status(str(exc))
            return
        self.diff_view.set_texts(
            pa.path.read_bytes(), pb.path.read_bytes(), f"{phase} — {self.name_of(a)}", f"{phase} — {self.name_of(b)}"
        )
        self.tabs.setCurrentWidget(self.diff_view)
        self.diff_view.next_change()

    def name_of(self, compilation: Compilation) -> str:
        """A compilation as the Compilation and Diff-with boxes list it ("3. B: llvm-cpu traced"): the two sides
        of a diff were named by their scratch folders ("llvm-cpu (iree-lens-compile-p8rxgvfr)"), nothing to
        tell variant A from B."""
        for k, (label, c) in enumerate(self.compilations):
            if c is compilation:
                return f"{k + 1}. {label}"
        return f"{compilation.request.target} ({compilation.out_dir.name})"

    def diff_with_other(self) -> None:
        j = self.other_box.currentIndex()
        if self.current is None or not 0 <= j < len(self.compilations):
            return
        item = self.phase_list.currentItem()
        phase = item.data(Qt.ItemDataRole.UserRole) if item else None
        other = self.compilations[j][1]
        self.diff_compilations(self.current, other, phase or self._common_phase(self.current, other))

    def compare_builds_with_other(self) -> int:
        """Start ``compare-builds`` of the current compilation (A) and the chosen other (B) on the engine worker
        with the workbench's function and inputs; the Builds A/B tab shows the result. Returns the request id
        (-1: not started, the reason in the tab)."""
        from app.views.build_compare_table import compare_builds_job

        j = self.other_box.currentIndex()
        other = self.compilations[j][1] if 0 <= j < len(self.compilations) else None
        workbench = getattr(self.services, "workbench", None)
        function = workbench.state.function if workbench is not None else None
        why = None
        if self.current is None or other is None or other is self.current:
            why = "Compare builds needs two compilations: the current one and another beside “Diff with”."
        elif not (self.current.ok and other.ok):
            why = "Compare builds needs two compilations that succeeded."
        elif not function:
            why = "Compare builds runs the open module's function: open a module and choose its function first."
        elif self.services is None or getattr(self.services, "worker", None) is None:
            why = "Compare builds needs the window's engine worker."
        self.tabs.setCurrentWidget(self.builds_view)
        if why is not None:
            self.builds_view.set_message(why)
            return -1
        a, b = self.current, other
        self.builds_view.set_message(f"Profiling {a.out_dir.name} and {b.out_dir.name} (3 rounds of 5 calls each)…")
        return self.services.worker.submit(
            compare_builds_job, str(a.vmfb_path), str(b.vmfb_path), function, list(workbench.state.inputs),
            tag="compare-builds",
            on_result=lambda result: self.builds_view.set_comparison(result, a.out_dir.name, b.out_dir.name),
            on_error=lambda err: self.builds_view.set_message(f"Compare builds failed: {err.message}"),
        )  # fmt: skip

    def _diagnostic_clicked(self, item: QListWidgetItem) -> None:
        self.open_diagnostic(item.data(Qt.ItemDataRole.UserRole))

    def open_diagnostic(self, d) -> bool:
        """Open the file a diagnostic points at (the source, a phase snapshot or an executable's dump) at
        its line; a diagnostic without a location shows the last phase reached."""
        path = Path(d.file) if d.file else None
        if path is not None and not path.is_absolute() and self.current is not None:
            for base in (self.current.source_path.parent, self.current.out_dir):
                if (base / path).exists():
                    path = base / path
                    break
        if path is not None and path.exists():
            self.viewer.open_file(path)
            self.tabs.setCurrentWidget(self.viewer)
            self.viewer.go_to_line(max(0, (d.line or 1) - 1), max(0, (d.column or 1) - 1))
            return True
        if self.current is not None and self.current.phases:
            self.show_phase(self.current.phases[-1].phase)
        return False

    def closeEvent(self, e) -> None:  # noqa: N802
        self.cancel()
        super().closeEvent(e)
