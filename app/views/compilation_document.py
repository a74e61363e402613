"""A compilation as a document: its phase timeline on top, the phases in order on the left, and the IR
of the chosen phase (the last snapshot when it opens) filling the rest.

Opened by the main window when an ``.mlir`` was compiled on opening; the compile panel offers the same
compilation for diffs and variants.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QSplitter, QVBoxLayout, QWidget

from app.views.ir_viewer import IrViewer
from app.views.phase_timeline import PhaseTimeline
from engine.compiler import PHASES, Compilation


class CompilationDocument(QWidget):
    def __init__(self, compilation: Compilation, context=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("compilationDocument")
        self.compilation = compilation
        self.context = context
        self.shown_phase: str | None = None

        self.summary = QLabel(self)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
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
        if compilation.timing is not None:
            self.timeline.set_timing(compilation.timing, [p.phase for p in compilation.phases])
        request = compilation.request
        self.summary.setText(
            f"<b>{compilation.source_path.name}</b> · {request.target} · {len(compilation.phases)}/{len(PHASES)} phases"
            f" · {len(compilation.executables)} executables · {compilation.elapsed_s:.2f} s"
            f" · <span style='color:#666'>{compilation.out_dir}</span>"
        )

        body = QSplitter(Qt.Orientation.Horizontal, self)
        body.addWidget(self.phase_list)
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
