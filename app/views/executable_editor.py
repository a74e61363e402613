"""The executable editor: a document with the executables of the current compilation or module, editable.

Left, the executables' texts (MLIR source per dispatch; LLVM IR of CPU libraries; SPIR-V of Vulkan
pipelines). Right, the text with MLIR highlighting (the IR viewer's tokenizer), a find bar, and compile
errors marked on their lines with the messages listed below (a click goes to the line). Edits are saved as
the user types (atomically, in the app's state folder) and come back after a restart or a crash.

Apply builds the edit: with the window's debug session (``session``) it swaps the executable into the
session's run and, paused at a dispatch, reruns it, showing the outputs before and after as a table
(``output_view_factory`` is the hook for the tensor inspector); without one it builds the edit off the GUI
thread (``engine.substitute``) and checks the interface against the module. Revert, Export (files + the ``iree-compile`` flags) and
Benchmark (the dispatch before/after the edit) act on the same session.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QKeySequence, QShortcut, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.views.action_strip import ActionStrip
from app.views.ir_mlir_syntax import MlirHighlighter
from engine.dispatch.tensor_types import element_name
from engine.errors import LensError
from engine.session.protocol import (
    BenchmarkDispatch,
    DispatchRerun,
    ExportSubstitutions,
    RerunDispatch,
    RevertSubstitution,
    Substitute,
    Substituted,
)
from engine.substitute.documents import DraftStore, EditableText
from engine.substitute.errors import EditCompileError, SourceDiagnostic

AUTOSAVE_DELAY_MS = 250
ERROR_LINE_COLOR = QColor("#fde2e2")


class ExecutableEditor(QWidget):
    """Edit executables and apply them to a module or a paused run; see the module docstring."""

    applied = Signal(str)  # the document's name, after a successful apply
    failed = Signal(str)  # the first error

    def __init__(
        self,
        documents: list[EditableText],
        *,
        scope: str,
        module_path: str | Path | None = None,
        drafts: DraftStore | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.documents = list(documents)
        self.scope = scope  # what the drafts belong to (the module or compilation path)
        self.module_path = Path(module_path) if module_path is not None else None
        self.drafts = drafts or DraftStore()
        # The window's session (executable_editor_session.SessionSubstitutions): applies, reruns, reverts,
        # exports and times the edits in the session's process.
        self.session = None
        # Hook for the tensor inspector: f(before, after, title) -> QWidget replaces the built-in table.
        self.output_view_factory: Callable[[np.ndarray, np.ndarray, str], QWidget] | None = None
        self.diagnostics: list[SourceDiagnostic] = []
        self.last_outputs: tuple[np.ndarray, np.ndarray] | None = None
        self.modified: set[str] = set()  # documents applied in the session, not reverted
        self.benchmark_text = ""
        self._current = -1
        self._loading = False
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="editor-build")
        self._job: concurrent.futures.Future | None = None
        self._job_done: Callable | None = None
        self._build_widgets()
        self._lay_out()
        self._autosave = QTimer(self, singleShot=True, interval=AUTOSAVE_DELAY_MS)
        self._autosave.timeout.connect(self.save_draft)
        self._poll = QTimer(self, interval=20)
        self._poll.timeout.connect(self._check_job)
        self.text.textChanged.connect(self._text_changed)
        self.list.currentRowChanged.connect(self.open_document)
        if self.documents:
            self.list.setCurrentRow(0)

    def _build_widgets(self) -> None:
        """The document list, the text with its find field, the errors, the buttons and the outputs."""
        self.list = QListWidget()
        # Labels begin where the executables differ (``list_labels``: "…dispatch_12_conv_…"): what is cut at a
        # narrow width is the end of the name, never the dispatch number (the kind is in the tooltip).
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        # Items as wide as the list, not their text: a wider item scrolled sideways and was cut at the right
        # end as well ("…cnn$async_dispatch_1 (MLI"); now the middle is elided and the tooltip has it all.
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        row_height = self.list.fontMetrics().height() + 4
        for doc, label in zip(self.documents, list_labels([d.title for d in self.documents])):
            item = QListWidgetItem(label)
            item.setToolTip(doc.title)
            item.setSizeHint(QSize(1, row_height))
            self.list.addItem(item)
        self.text = QPlainTextEdit()
        self.text.setObjectName("executableText")
        font = QFont("monospace")
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.highlighter = MlirHighlighter(self.text.document())
        self.find_edit = QLineEdit()
        self.find_edit.setPlaceholderText("Find (Enter: next, Shift+Enter: previous)")
        self.find_edit.returnPressed.connect(lambda: self.find(self.find_edit.text()))
        QShortcut(QKeySequence.StandardKey.Find, self, activated=self._focus_find)
        self.errors = QListWidget()
        self.errors.setMaximumHeight(110)
        self.errors.itemActivated.connect(self._error_clicked)
        self.errors.itemClicked.connect(self._error_clicked)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.apply_button = QPushButton("Apply")
        self.revert_button = QPushButton("Revert")
        self.export_button = QPushButton("Export…")
        self.benchmark_button = QPushButton("Benchmark")
        self.rerun_button = QPushButton("Rerun")
        self.rerun_button.setToolTip("Run the paused dispatch again from its inputs, with the applied edits")
        self.rerun_button.clicked.connect(self.rerun)
        self.apply_button.clicked.connect(self.apply)
        self.revert_button.clicked.connect(self.revert)
        self.export_button.clicked.connect(self._export_clicked)
        self.benchmark_button.clicked.connect(self.benchmark)
        self.outputs = QWidget()
        self.outputs_layout = QVBoxLayout(self.outputs)
        self.outputs_layout.setContentsMargins(0, 0, 0, 0)

        self.list.setMinimumWidth(120)
        self.find_edit.setMinimumWidth(140)

    def _lay_out(self) -> None:
        # The buttons wrap onto another row rather than shrink: squeezed beside the outputs after Apply at
        # 1920x1080 they read "Export." and "Benchma". The find field has a row of its own.
        buttons = ActionStrip()
        buttons.setObjectName("editorButtons")
        for b in (self.apply_button, self.revert_button, self.rerun_button, self.export_button, self.benchmark_button):
            buttons.addWidget(b)
        source = QWidget()
        sl = QVBoxLayout(source)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.addWidget(self.find_edit)
        sl.addWidget(self.text, 1)
        sl.addWidget(self.errors)
        # The outputs before and after the edit on a tab of their own, as wide as the text: beside it they
        # had a third of the editor and the inspector's controls read "rows d", "colum d", "Histogran".
        self.panes = QTabWidget()
        self.panes.setObjectName("editorPanes")
        self.panes.setDocumentMode(True)
        self.panes.addTab(source, "Source")
        self.panes.addTab(self.outputs, "Outputs (before / after the edit)")
        self.panes.setTabVisible(1, False)  # until a rerun has outputs to show
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(buttons)
        rl.addWidget(self.panes, 1)
        rl.addWidget(self.status)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.list)
        split.addWidget(right)
        split.setStretchFactor(1, 3)
        split.setSizes([180, 880])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(split)

    # -- documents and drafts

    @property
    def document(self) -> EditableText | None:
        return self.documents[self._current] if 0 <= self._current < len(self.documents) else None

    def open_document(self, index: int) -> None:
        if self._autosave.isActive():
            self._autosave.stop()
            self.save_draft()
        if not 0 <= index < len(self.documents):
            return
        self._current = index
        doc = self.documents[index]
        draft = self.drafts.load(self.scope, doc)
        self._loading = True
        self.text.setPlainText(draft if draft is not None else doc.original)
        self._loading = False
        self.show_diagnostics([])
        restored = draft is not None and draft != doc.original
        self.status.setText(f"Restored your edit of {doc.name}." if restored else doc.origin)
        if self.list.currentRow() != index:
            self.list.setCurrentRow(index)

    def _mark(self, name: str, modified: bool) -> None:
        """Mark (or unmark) the documents of ``name`` as applied: a dot before their title."""
        (self.modified.add if modified else self.modified.discard)(name)
        labels = list_labels([d.title for d in self.documents])
        for i, doc in enumerate(self.documents):
            item = self.list.item(i)
            if item is not None:
                item.setText(f"● {labels[i]}" if doc.name in self.modified else labels[i])
                item.setToolTip(f"{doc.title}: " + ("applied, the session runs this edit" if doc.name in self.modified
                                                   else doc.origin))  # fmt: skip

    def document_for_dispatch(self, export: str) -> int | None:
        """The document of a dispatch's export: its dispatch executable's MLIR source (the longest name that
        prefixes the export), else its SPIR-V or the PTX module that defines its kernel, else its library's
        LLVM IR."""
        best = None
        for i, doc in enumerate(self.documents):
            defines = doc.kind == "ptx" and bool(export) and f".entry {export}(" in doc.original
            if export != doc.name and not export.startswith(doc.name + "_") and not defines:
                continue
            rank = ({"mlir": 0, "spirv": 1, "ptx": 1, "llvm": 2}.get(doc.kind, 3), -len(doc.name))
            if best is None or rank < best[0]:
                best = (rank, i)
        return best[1] if best is not None else None

    def follow_dispatch(self, info) -> None:
        """The run paused at a dispatch: open its executable's text."""
        export = getattr(info, "export", "") or ""
        index = self.document_for_dispatch(export)
        if index is not None and index != self._current:
            self.open_document(index)
        if index is not None and self.documents[index].kind == "ptx":
            # A linked PTX module holds every kernel: show the stopped dispatch's own.
            text = self.text.toPlainText()
            at = text.find(f".entry {export}(")
            if at >= 0:
                self.go_to_line(text.count("\n", 0, at) + 1)

    def select(self, name: str, kind: str | None = None) -> None:
        for i, doc in enumerate(self.documents):
            if doc.name == name and (kind is None or doc.kind == kind):
                self.open_document(i)
                return
        raise KeyError(name)

    def _text_changed(self) -> None:
        if not self._loading:
            self._autosave.start()

    def save_draft(self) -> Path | None:
        doc = self.document
        if doc is None:
            return None
        return self.drafts.save(self.scope, doc, self.text.toPlainText())

    def is_edited(self) -> bool:
        doc = self.document
        return doc is not None and self.text.toPlainText() != doc.original

    # -- find

    def _focus_find(self) -> None:
        self.find_edit.setFocus()
        self.find_edit.selectAll()

    def find(self, needle: str, backward: bool = False) -> bool:
        """Select the next (or previous) occurrence of ``needle``, wrapping around; False if there is none."""
        if not needle:
            return False
        from PySide6.QtGui import QTextDocument

        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        if self.text.find(needle, flags):
            return True
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End if backward else QTextCursor.MoveOperation.Start)
        self.text.setTextCursor(cursor)
        return self.text.find(needle, flags)

    # -- diagnostics

    def show_diagnostics(self, diagnostics: list[SourceDiagnostic]) -> None:
        """List the messages and mark their lines in the text."""
        self.diagnostics = list(diagnostics)
        self.errors.clear()
        selections = []
        for d in self.diagnostics:
            item = QListWidgetItem(f"line {d.line}: {d.severity}: {d.message}" if d.line else f"{d.severity}: {d.message}")
            item.setData(Qt.ItemDataRole.UserRole, d.line)
            self.errors.addItem(item)
            if d.line and d.severity == "error":
                block = self.text.document().findBlockByLineNumber(d.line - 1)
                if block.isValid():
                    sel = QTextEdit.ExtraSelection()
                    sel.format.setBackground(ERROR_LINE_COLOR)
                    sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                    sel.format.setToolTip(d.message)
                    sel.cursor = QTextCursor(block)
                    selections.append(sel)
        self.text.setExtraSelections(selections)
        self.errors.setVisible(bool(self.diagnostics))
        if self.diagnostics:  # the messages are read beside their lines, on the source's tab
            self.panes.setCurrentIndex(0)

    def error_lines(self) -> list[int]:
        return [s.cursor.blockNumber() + 1 for s in self.text.extraSelections()]

    def _error_clicked(self, item: QListWidgetItem) -> None:
        line = item.data(Qt.ItemDataRole.UserRole)
        if line:
            self.go_to_line(int(line))

    def go_to_line(self, line: int) -> None:
        block = self.text.document().findBlockByLineNumber(max(0, line - 1))
        self.text.setTextCursor(QTextCursor(block))
        self.text.centerCursor()

    # -- actions

    def set_bridge(self, bridge, workbench=None) -> None:
        """Act through the window's session bridge whenever its run (``workbench.state``) is paused at a dispatch."""
        from app.views.executable_editor_session import SessionSubstitutions

        self.session = SessionSubstitutions(bridge, self, workbench) if bridge is not None else None
        if self.session is not None:
            self.session.failed.connect(self._session_failed)
            bridge.dispatchStopped.connect(self.follow_dispatch)
            paused = self.session.paused_dispatch()
            if paused is not None:
                self.follow_dispatch(paused)

    def _through_session(self) -> bool:
        return self.session is not None and self.session.available

    def _session_failed(self, text: str, refused) -> None:
        from app.views.executable_editor_session import diagnostics_of

        diagnostics = diagnostics_of(refused) if refused is not None else []
        self.show_diagnostics(diagnostics)
        if diagnostics:
            first = next((d for d in diagnostics if d.severity == "error"), diagnostics[0])
            text = f"line {first.line}: {first.message}" if first.line else text
        self.status.setText(f"Not applied: {text}")
        self.failed.emit(text)

    def rerun(self) -> None:
        """Rerun the paused dispatch from its inputs (through the session)."""
        if self._through_session() and self.session.paused:
            self.session.ask(RerunDispatch(), then=self._rerun_answered)
            self.status.setText("Rerunning the dispatch in the session…")
        else:
            self.status.setText("Rerun needs a run paused at a dispatch.")

    def _rerun_answered(self, answer: DispatchRerun) -> None:
        """Before (the module's kernel) and after (the edit) of the paused dispatch's own typed tensors."""
        after = [t.to_numpy() for t in answer.after]
        before = [t.to_numpy() for t in answer.before] if answer.before is not None else after
        info = self.session.paused_dispatch() if self.session is not None else None
        label = f"#{info.ordinal} {info.export}" if info is not None else f"{answer.sequence}"
        message = f"Dispatch {label} rerun"
        if after:
            pair = self._typed_pair(info, before, after)
            if pair is not None:
                b, a = pair
                shape = "x".join(map(str, a.array.shape)) or "scalar"
                self.show_outputs(b.array, a.array, f"Dispatch {label}: {a.label} ({shape}x{a.type.element})")
                same = b.array.tobytes() == a.array.tobytes()
                message += f"; {a.label} {'unchanged' if same else 'changed'} by the edits"
            else:
                index = _changed_binding(tuple(before), tuple(after))
                self.show_outputs(before[index], after[index], f"Dispatch {label} binding {index}")
        prefix = self.status.text().removesuffix("…") if self.status.text().startswith(("Applied", "Reverted")) else ""
        self.status.setText(f"{prefix}{'; ' if prefix else ''}{message}.")

    def _typed_pair(self, info, before: list[np.ndarray], after: list[np.ndarray]):
        """The paused dispatch's first changed output tensor (else its first output), typed by the engine's
        one typing (``engine.dispatch.typed_tensors``) from the sources this editor lists: (before, after)
        ``TypedTensor``s; None without outputs."""
        if info is None or len(before) != len(after):
            return None
        from engine.dispatch.typed_tensors import dispatch_tensors

        sources = self._binding_types()
        accesses = [b.access for b in info.bindings]

        def typed(arrays):
            return dispatch_tensors(info.export, info.constants, list(arrays), list(arrays), sources, accesses)

        tb, ta = typed(before), typed(after)
        outputs = [(b, a) for b, a in zip(tb, ta, strict=False) if a.role == "output" and b.label == a.label]
        if not outputs:
            return None
        changed = [(b, a) for b, a in outputs if b.array.tobytes() != a.array.tobytes()]
        return (changed or outputs)[0]

    def _binding_types(self):
        """The executable sources this editor lists (``ExecutableSources``; none: untyped bytes)."""
        if getattr(self, "_types", None) is None:
            from engine.dispatch.typed_tensors import NO_SOURCES, read_sources

            files = [d.origin for d in self.documents if d.kind == "mlir" and Path(d.origin).is_file()]
            try:
                self._types = read_sources(files) if files else NO_SOURCES
            except LensError:
                self._types = NO_SOURCES
        return self._types

    def busy(self) -> bool:
        return self._job is not None

    def _run(self, fn: Callable, done: Callable) -> None:
        if self._job is not None:
            self.status.setText("Still working on the last action…")
            return
        self._job = self._pool.submit(fn)
        self._job_done = done
        self._poll.start()
        for b in (self.apply_button, self.revert_button, self.benchmark_button):
            b.setEnabled(False)

    def _check_job(self) -> None:
        job = self._job
        if job is None or not job.done():
            return
        self._poll.stop()
        self._job = None
        done, self._job_done = self._job_done, None
        for b in (self.apply_button, self.revert_button, self.benchmark_button):
            b.setEnabled(True)
        error = job.exception()
        if error is not None:
            self._report_error(error)
            return
        if done is not None:
            done(job.result())

    def _report_error(self, error: BaseException) -> None:
        if isinstance(error, EditCompileError):
            self.show_diagnostics(error.diagnostics)
            errors = [d for d in error.diagnostics if d.severity == "error"] or error.diagnostics
            first = errors[0] if errors else None
            where = f"line {first.line}: " if first is not None and first.line else ""
            text = f"{len(errors)} error(s); {where}{first.message if first else error}"
        else:
            self.show_diagnostics([])
            text = str(error) if isinstance(error, LensError) else f"{type(error).__name__}: {error}"
        self.status.setText(f"Not applied: {text}")
        self.failed.emit(text)

    def apply(self) -> None:
        """Build the edit; with the session swap it in (and rerun a paused dispatch); otherwise check it builds
        and fits."""
        doc = self.document
        if doc is None:
            return
        path = self.save_draft()
        self.status.setText(f"Building {doc.name}…")
        if self._through_session():
            # In the session process: a faulting kernel takes down only that process; the draft is saved.
            # The edit is the session's until reverted: every later run uses it.
            def applied(answer: Substituted) -> None:
                self.show_diagnostics([])
                self._mark(doc.name, True)
                if self.session.paused:
                    self.status.setText(f"Applied {doc.name} in {answer.seconds:.2f} s…")
                    self.applied.emit(doc.name)
                    self.session.ask(RerunDispatch(), then=self._rerun_answered)
                else:
                    self.status.setText(
                        f"Applied {doc.name} in {answer.seconds:.2f} s: the next runs use it (Revert gives the "
                        "module's code back)."
                    )
                    self.applied.emit(doc.name)

            self.session.ask(Substitute(doc.name, str(path)), then=applied)
            return
        if self.module_path is None:
            self.status.setText("No module to apply to: open a module or start a debug run.")
            return
        module_path = self.module_path

        def build():
            from engine.runtime.vmfb.module import open_vmfb
            from engine.substitute.build import SubstitutionSpec, build_replacement

            return build_replacement(open_vmfb(module_path), SubstitutionSpec.parse(f"{doc.name}={path}"))

        self._run(build, self._built)

    def _built(self, replacement) -> None:
        self.show_diagnostics([])
        self.status.setText(
            f"Built {replacement.spec.name}: {len(replacement.data)} bytes in {replacement.build_s:.2f} s; "
            f"interface matches ({', '.join(replacement.exports)}). Start a debug run to apply it."
        )
        self.applied.emit(replacement.spec.name)

    def show_outputs(self, before: np.ndarray, after: np.ndarray, title: str) -> None:
        """The dispatch's output before and after the edit (as f32 when the bytes allow)."""
        self.last_outputs = (before, after)
        self.outputs.show()
        self.panes.setTabVisible(1, True)
        self.panes.setCurrentIndex(1)
        while self.outputs_layout.count():
            w = self.outputs_layout.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        if self.output_view_factory is not None:
            self.outputs_layout.addWidget(self.output_view_factory(before, after, title))
            return
        self.outputs_layout.addWidget(QLabel(title))
        self.outputs_layout.addWidget(output_table(before, after))

    def revert(self) -> None:
        """Give the document its original text back (and the session's run its original code)."""
        doc = self.document
        if doc is None:
            return
        if self._through_session():
            # The session's state: the module's code for this and every later run, until the next Apply.
            def reverted(_answer) -> None:
                self._mark(doc.name, False)
                if self.session.paused:
                    self.rerun()
                else:
                    self.status.setText(f"Reverted {doc.name}: the next runs use the module's code.")

            self.session.ask(RevertSubstitution(doc.name), then=reverted)
        self.drafts.discard(self.scope, doc)
        self._loading = True
        self.text.setPlainText(doc.original)
        self._loading = False
        self.show_diagnostics([])
        self.status.setText(f"Reverted {doc.name}.")

    def _export_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export the edits to")
        if folder:
            self.export_to(folder)

    def export_to(self, folder: str | Path) -> Path:
        """Write the edited files and the flags that reproduce them (``substitutions.txt``)."""
        folder = Path(folder)
        if self._through_session() and self.modified:
            self.session.ask(
                ExportSubstitutions(str(folder)), then=lambda answer: self.status.setText(f"Exported to {answer.path}.")
            )
            self.status.setText(f"Exporting the session's edits to {folder}…")
            return folder / "substitutions.txt"
        doc = self.document
        folder.mkdir(parents=True, exist_ok=True)
        file = folder / f"{doc.name}{doc.suffix}" if doc else folder / "edit"
        if doc is not None:
            file.write_text(self.text.toPlainText())
        lines = ["# Reproduce this edit outside IREE Lens (run from this folder)."]
        if doc is not None and doc.kind == "mlir":
            lines.append(f"--iree-hal-substitute-executable-source={doc.name}={file.name}")
        if doc is not None:
            module = self.module_path.name if self.module_path else "MODULE.vmfb"
            lines.append(f"iree-lens run {module} --substitute={doc.name}={file.name} --function=... --input=...")
        out = folder / "substitutions.txt"
        out.write_text("\n".join(lines) + "\n")
        self.status.setText(f"Exported to {out}.")
        return out

    def benchmark(self) -> None:
        """Time the paused dispatch with the module's code and with the edit (same loop, fresh buffers)."""
        if self._through_session() and self.session.paused:
            self.status.setText("Timing the paused dispatch in the session…")
            self.session.ask(BenchmarkDispatch(10), then=self._session_benchmarked)
            return
        self.status.setText(
            "Benchmark needs a run paused at a dispatch (its real bindings); or use "
            "iree-lens benchmark MODULE.vmfb --dispatch=NAME --function=F --input=... [--substitute=...]."
        )

    def _session_benchmarked(self, answer) -> None:
        info = self.session.paused_dispatch() if self.session is not None else None
        label = f"#{info.ordinal} {info.export}" if info is not None else "the paused dispatch"

        def fmt(median: float, spread) -> str:
            text = f"{median * 1e6:.1f} µs"
            return text + (f" ({spread[0] * 1e6:.1f}–{spread[1] * 1e6:.1f})" if spread else "")

        text = f"Dispatch {label}: module's kernel {fmt(answer.original_s, answer.original_spread_s)}"
        if answer.edited:
            text += f", edited {fmt(answer.edited_s, answer.edited_spread_s)}"
        else:
            text += " (no edit applied)"
        text += " per dispatch, median (10th–90th percentile)"
        if answer.iree_original_s is not None:
            edited = f" → {answer.iree_edited_s * 1e6:.1f} µs" if answer.iree_edited_s is not None else ""
            text += f"; iree-benchmark-executable: {answer.iree_original_s * 1e6:.1f} µs{edited}"
        self.benchmark_result = (answer.original_s, answer.edited_s)
        self.iree_benchmark_result = (answer.iree_original_s, answer.iree_edited_s)
        self.benchmark_text = text + "."
        self.status.setText(self.benchmark_text)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if self._autosave.isActive():
            self._autosave.stop()
            self.save_draft()
        self._pool.shutdown(wait=False, cancel_futures=True)
        super().closeEvent(event)


def editor_for_compilation(compilation, drafts: DraftStore | None = None) -> ExecutableEditor:
    """An editor of a ``Compilation``'s executables (its dumps), applying to its module."""
    from engine.substitute.documents import documents_from_dumps

    docs = documents_from_dumps(Path(compilation.out_dir) / "executables", "module")
    return ExecutableEditor(docs, scope=str(compilation.out_dir), module_path=compilation.vmfb_path, drafts=drafts)


def editor_for_module(path: str | Path, drafts: DraftStore | None = None) -> ExecutableEditor:
    """An editor of every text known for a ``.vmfb`` (``documents_for_module_file``: dumps or ``iree-lens
    sources`` files beside it, else the module's Vulkan SPIR-V or CUDA PTX); no documents when none is known."""
    from engine.substitute.documents import documents_for_module_file

    path = Path(path)
    return ExecutableEditor(documents_for_module_file(path), scope=str(path.resolve()), module_path=path, drafts=drafts)


NO_SOURCES = (
    "{name}: no editable text of its executables is known here. IREE Lens edits an executable's MLIR source, "
    "its CPU library's LLVM IR, its Vulkan SPIR-V or its CUDA PTX; a CPU module holds only machine code. Open the program "
    "(.mlir) instead, so IREE Lens compiles it and keeps its sources, or write them beside the module: "
    "iree-lens sources PROGRAM.mlir --out=DIR [the same IREE flags], then open DIR/<module>.vmfb."
)


def list_labels(titles: list[str]) -> list[str]:
    """The documents' titles as the narrow list shows them: the prefix they all share (``main$async_``)
    dropped up to the word that differs (``dispatch_3_…``), so the part that tells them apart is seen."""
    import os

    if len(titles) < 2:
        return list(titles)
    common = os.path.commonprefix(titles)
    cut = max(common.rfind("$"), common.rfind("_")) + 1
    labels = []
    for t in titles:
        # Each dispatch from its own "dispatch_N" (one linked library among them leaves no common prefix:
        # every dispatch then read "main$async_…LIR source)" on squeezenet).
        at = t.find("dispatch_")
        start = at if at > 3 else cut
        labels.append(f"…{t[start:]}" if start > 3 else t)
    return labels


def inspector_output_view(before: np.ndarray, after: np.ndarray, title: str) -> QWidget:
    """The outputs in the tensor inspector: the edited output, compared with the original (its reference)."""
    from app.views.tensor_inspector import InspectedTensor, TensorInspector

    raw = before.dtype == np.uint8 and after.dtype == np.uint8  # untyped bytes: read as f32 when they can be
    as_float = raw and before.size % 4 == 0 and after.size % 4 == 0
    b = before.view(np.float32) if as_float else before
    a = after.view(np.float32) if as_float else after
    inspector = TensorInspector()
    inspector.setObjectName("outputsInspector")
    if raw:
        kind = f"{a.size}x{'f32' if as_float else 'i8'}"
    else:  # IREE's element names, as the inspector writes them (f32, not numpy's float32)
        kind = "x".join([*map(str, a.shape), element_name(a.dtype)])
    # The distinguishing word first: a narrow list elides the end ("Dispatch #…" twice).
    inspector.set_tensors(
        [
            InspectedTensor(f"after the edit: {title}", a, kind, reference=b),
            InspectedTensor(f"before the edit: {title}", b, kind),
        ]
    )
    return inspector


def _changed_binding(before: tuple[np.ndarray, ...], after: tuple[np.ndarray, ...]) -> int:
    """The binding the edit changed (the last one if none did: the dispatch's output, by IREE's order)."""
    for i in range(len(after) - 1, -1, -1):
        if before[i].shape != after[i].shape or not np.array_equal(before[i], after[i]):
            return i
    return len(after) - 1


def output_table(before: np.ndarray, after: np.ndarray, limit: int = 4096) -> QTableWidget:
    """Element, before, after, difference; untyped bytes read as float32 when their length allows."""
    as_float = before.dtype == np.uint8 and before.size % 4 == 0 and after.size % 4 == 0
    b = (before.view(np.float32) if as_float else before).reshape(-1)
    a = (after.view(np.float32) if as_float else after).reshape(-1)
    n = min(max(b.size, a.size), limit)
    table = QTableWidget(n, 4)
    table.setObjectName("outputsTable")
    table.setHorizontalHeaderLabels(["#", "before", "after", "after − before"])
    table.verticalHeader().setVisible(False)
    for i in range(n):
        bv = b[i] if i < b.size else None
        av = a[i] if i < a.size else None
        cells = [str(i), _fmt(bv), _fmt(av), _fmt(av - bv) if bv is not None and av is not None else ""]
        for j, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if j == 2 and bv is not None and av is not None and bv != av:
                item.setBackground(QColor("#fff3c4"))
            table.setItem(i, j, item)
    table.resizeColumnsToContents()
    return table


def _fmt(v) -> str:
    if v is None:
        return ""
    return f"{v:.6g}" if isinstance(v, np.floating | float) else str(v)


class ExecutableEditorPanel(QWidget):
    """The editor as a document of the main window: follows the current compilation (or module)."""

    def __init__(self, services, parent: QWidget | None = None):
        super().__init__(parent)
        self.services = services
        self.editor: ExecutableEditor | None = None
        self.placeholder = QLabel("Compile a program or open a module to edit its executables.")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        # A document tab must not widen the window (the layout would impose its children's minimum).
        self.setMinimumSize(1, 1)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.addWidget(self.placeholder)
        context = services.context
        context.compilationChanged.connect(self._follow)
        context.moduleChanged.connect(self._follow)
        self._stale = True  # built when shown: listing a big module's SPIR-V runs spirv-dis per pipeline
        if self.isVisible():
            self._rebuild()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self._stale:
            self._rebuild()

    def minimumSizeHint(self):  # noqa: N802 (Qt's name)
        from PySide6.QtCore import QSize

        return QSize(1, 1)

    def _follow(self, *_args) -> None:
        self._stale = True
        if self.isVisible():
            self._rebuild()

    def _rebuild(self) -> None:
        self._stale = False
        context = self.services.context
        compilation = context.compilation
        module = context.module
        try:
            # The compile panel keeps its last compilation when another module opens: its executables are the
            # module's only when it built that module (else the editor showed the first program's executables
            # under the second module, and Apply would have built them against it).
            ours = module is None or module.built_by(compilation)
            if compilation is not None and getattr(compilation, "vmfb_path", None) and ours:
                editor = editor_for_compilation(compilation)
            elif module is not None:
                editor = editor_for_module(module.path)
            else:
                return
        except LensError as e:
            self._drop_editor()
            self.placeholder.setText(f"Cannot list the executables: {e}")
            self.placeholder.show()
            return
        self._drop_editor()
        if not editor.documents:
            # Say what is missing rather than show an empty list.
            self.placeholder.setText(NO_SOURCES.format(name=Path(str(editor.module_path or "The module")).name))
            self.placeholder.show()
            editor.deleteLater()
            return
        editor.output_view_factory = inspector_output_view
        editor.set_bridge(getattr(self.services, "session_bridge", None), getattr(self.services, "workbench", None))  # paused runs: through the session
        self.editor = editor
        self.placeholder.hide()
        self._layout.addWidget(editor)

    def _drop_editor(self) -> None:
        """The editor of what was shown before goes (never left beside another module's placeholder)."""
        if self.editor is not None:
            self._layout.removeWidget(self.editor)
            self.editor.close()
            self.editor.deleteLater()
            self.editor = None
