"""A one-line label that its width cuts with an ellipsis, never widening what holds it.

A plain ``QLabel`` as wide as its text sets the minimum width of its layout (a long dispatch name widened the
zones histogram past its splitter, cutting the title and the axis); one with an ``Ignored`` size policy is
cut mid-character at the edge, with no sign that more follows. ``ElidedLabel`` keeps the whole text as its
``text()`` and tooltip and paints as much of it as fits, with "…" where it is cut; its context menu copies
the whole text.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QGuiApplication, QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """One line of plain text, elided at ``mode`` (right, middle, left) to the label's width."""

    def __init__(
        self, text: str = "", parent: QWidget | None = None, mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight
    ):
        super().__init__(parent)
        self.mode = mode
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        copy = QAction("Copy", self)
        copy.triggered.connect(lambda: QGuiApplication.clipboard().setText(self.text()))
        self.addAction(copy)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        """The whole text, shown elided where it does not fit; the tooltip is the whole text."""
        super().setText(text)
        self.setToolTip(text)

    def shown_text(self) -> str:
        """What is painted at the current width (the whole text when it fits)."""
        line = self.text().replace("\n", " ")
        return self.fontMetrics().elidedText(line, self.mode, max(0, self.contentsRect().width()))

    def is_elided(self) -> bool:
        return self.shown_text() != self.text().replace("\n", " ")

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        """An ellipsis' width: the label never sets its parent's minimum width."""
        hint = super().minimumSizeHint()
        return QSize(self.fontMetrics().horizontalAdvance("…") * 3, hint.height())

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(self.alignment()) | Qt.TextFlag.TextSingleLine, self.shown_text())
        painter.end()
