"""The start page: what IREE Lens does in two lines, the bundled samples and the recent files, each one
click away from being opened (a sample ``.mlir`` is compiled, its phases opened as documents)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.samples import sample_names, sample_path

PATH_ROLE = Qt.ItemDataRole.UserRole


def _list(parent: QWidget, name: str) -> QListWidget:
    widget = QListWidget(parent)
    widget.setObjectName(name)
    widget.setAlternatingRowColors(True)
    return widget


class StartPage(QWidget):
    """``open_file(path)`` is called with the path of a clicked sample or recent file."""

    def __init__(self, open_file: Callable[[str], object], open_dialog: Callable[[], None], parent=None):
        super().__init__(parent)
        self.setObjectName("startPage")
        self._open_file = open_file
        title = QLabel(
            "<h2>IREE Lens</h2>"
            "<p>A debugger for programs compiled by IREE: open a <b>.vmfb</b> to inspect and step it, or an "
            "<b>.mlir</b> to compile it and walk its phases. Drop a file on the window, use "
            "<b>File &gt; Open</b> (Ctrl+O), or pick one below.</p>",
            self,
        )
        title.setWordWrap(True)
        open_button = QPushButton("Open…", self)
        open_button.clicked.connect(open_dialog)

        self.samples = _list(self, "startSamples")
        for name in sample_names():
            item = QListWidgetItem(f"{name}.mlir")
            item.setData(PATH_ROLE, str(sample_path(name)))
            item.setToolTip(str(sample_path(name)))
            self.samples.addItem(item)
        self.recent = _list(self, "startRecent")
        for widget in (self.samples, self.recent):
            widget.itemActivated.connect(self._activated)
            widget.itemDoubleClicked.connect(self._activated)

        columns = QHBoxLayout()
        for label, widget in (("Samples (compiled when opened)", self.samples), ("Recent files", self.recent)):
            box = QVBoxLayout()
            box.addWidget(QLabel(f"<b>{label}</b>", self))
            box.addWidget(widget, 1)
            columns.addLayout(box, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 16, 24, 16)
        layout.addWidget(title)
        row = QHBoxLayout()
        row.addWidget(open_button)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addLayout(columns, 1)
        # Its text wraps and its lists scroll: it must not widen the window's minimum.
        self.setMinimumSize(220, 160)

    def set_recent_files(self, files: list[Path]) -> None:
        self.recent.clear()
        for path in files:
            item = QListWidgetItem(path.name)
            item.setData(PATH_ROLE, str(path))
            item.setToolTip(str(path))
            self.recent.addItem(item)
        if not files:
            placeholder = QListWidgetItem("(none yet)")
            placeholder.setFlags(Qt.ItemFlag.NoItemFlags)
            self.recent.addItem(placeholder)

    def _activated(self, item: QListWidgetItem) -> None:
        path = item.data(PATH_ROLE)
        if path:
            self._open_file(path)
