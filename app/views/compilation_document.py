"""A compilation as a document: its phase timeline on top, the phases in order on the left, and the IR
of the chosen phase (the last snapshot when it opens) filling the rest.

Opened by the main window when an ``.mlir`` was compiled on opening; the compile panel offers the same
compilation for diffs and variants.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.views.ir_diff import IrDiffView
from app.views.ir_viewer import IrViewer
from app.views.phase_timeline import PhaseTimeline
from engine.compiler import PHASES, Compilation


class CompilationDocument(QWidget):
    """``open_document(widget, title, key)`` (the window's) opens the diffs this document makes."""

    def __init__(self, compilation: Compilation, context=None, parent: QWidget | None = None, open_document=None):
        super().__init__(parent)
        self._open_document = open_document
        self.setObjectName("compilationDocument")
        self.compilation = compilation
        self.context = context
        self.shown_phase: str | None = None

        self.summary = QLabel(self)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The output folder makes this line long: cut by the window, never widening it (full text: tooltip).
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.timeline = PhaseTimeline(self)
        self.timeline.setMinimumHeight(110)
        self.phase_list = QListWidget(self)
        self.phase_list.setObjectName("compilationPhases")
        self.viewer = IrViewer(self)

        for snap in compilation.phases:
            item = QListWidgetItem(f"{snap.index:2d}. {snap.phase}")
            item.setData(Qt.ItemDataRole.UserRole, snap.phase)
            item.setToolTip(str(snap.path))
            self.phase_list.addItem(item)
        self.phase_list.setMaximumWidth(260)
        self.diff_button = QPushButton("Diff with previous phase", self)
        self.diff_button.setToolTip("Open the changes this phase made to the IR as a document")
        self.diff_button.clicked.connect(lambda: self.diff_with_previous())
        if compilation.timing is not None:
            self.timeline.set_timing(compilation.timing, [p.phase for p in compilation.phases])
        request = compilation.request
        self.summary.setText(
            f"<b>{compilation.source_path.name}</b> · {request.target} · {len(compilation.phases)}/{len(PHASES)} phases"
            f" · {len(compilation.executables)} executables · compiled in {compilation.elapsed_s:.2f} s"
            f" · <span style='color:#666'>{compilation.out_dir}</span>"
        )
        self.summary.setToolTip(str(compilation.out_dir))

        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.phase_list, 1)
        side_layout.addWidget(self.diff_button)
        side.setMaximumWidth(260)
        body = QSplitter(Qt.Orientation.Horizontal, self)
        body.addWidget(side)
        body.addWidget(self.viewer)
        body.setStretchFactor(1, 1)
        body.setSizes([200, 800])
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.timeline)
        split.addWidget(body)
        split.setStretchFactor(1, 1)
        split.setSizes([140, 600])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(split, 1)

        self.phase_list.currentItemChanged.connect(
            lambda item, _prev: item is not None and self.show_phase(item.data(Qt.ItemDataRole.UserRole))
        )
        self.timeline.phaseClicked.connect(self.show_phase)
        if compilation.phases:
            self.show_phase(compilation.phases[-1].phase)

    def diff_with_previous(self, phase: str | None = None):
        """Open the diff of ``phase`` (the shown one by default) against the phase before it as a document;
        returns the diff view, or ``None`` for the first phase."""
        phase = phase or self.shown_phase
        names = [p.phase for p in self.compilation.phases]
        if phase not in names or names.index(phase) == 0:
            return None
        before = self.compilation.phases[names.index(phase) - 1]
        after = self.compilation.phase(phase)
        view = IrDiffView()
        view.set_texts(before.path.read_bytes(), after.path.read_bytes(), before.path.name, after.path.name)
        view.next_change()
        title = f"Diff {before.phase} → {phase}"
        key = f"diff:{self.compilation.out_dir}:{before.phase}:{phase}"
        if self._open_document is None:
            view.setWindowTitle(title)
            return view
        return self._open_document(view, title, key)

    @property
    def phases(self) -> list[str]:
        return [self.phase_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.phase_list.count())]

    def show_phase(self, phase: str) -> bool:
        """Show the IR of ``phase``; False when this compilation has no snapshot of it."""
        try:
            snap = self.compilation.phase(phase)
        except KeyError:
            return False
        if phase == self.shown_phase:
            return True
        self.shown_phase = phase
        self.viewer.open_file(snap.path)
        self.timeline.set_current_phase(phase)
        for i in range(self.phase_list.count()):
            item = self.phase_list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == phase and self.phase_list.currentItem() is not item:
                self.phase_list.setCurrentItem(item)
        if self.context is not None:
            self.context.set_phase(phase)
        return True
