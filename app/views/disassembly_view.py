"""A read-only disassembly listing with navigable block labels.

Clicking a branch target (``^bb3`` in ``vm.br ^bb3(...)``) scrolls to that block's label; Back
(Alt+Left, or the toolbar button) returns to where the jump started. Lines may carry the pc of their
instruction; moving the cursor onto one reports it (``pcSelected``) so the window can broadcast it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QKeySequence,
    QMouseEvent,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QToolBar, QVBoxLayout, QWidget

from app.views.hex_view import monospace_font

LABEL_RE = re.compile(r"^\s*\^(bb\d+)\b.*:\s*$")
TARGET_RE = re.compile(r"\^(bb\d+)\b")
MNEMONIC_RE = re.compile(r"\bvm\.[\w.]+")
REGISTER_RE = re.compile(r"%[iIrR]\d+(?::\d+)?")
COMMENT_RE = re.compile(r"//.*$")
CALLEE_RE = re.compile(r"@[\w.$-]+")


@dataclass(frozen=True)
class ListingLine:
    """One line of a listing: its text and, for an instruction, its pc (bytecode offset in the function)."""

    text: str
    pc: int | None = None


def _format(color: str, bold: bool = False, underline: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(color))
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    if underline:
        fmt.setFontUnderline(True)
    return fmt


class DisassemblyHighlighter(QSyntaxHighlighter):
    def __init__(self, document: QTextDocument):
        super().__init__(document)
        self.label = _format("#8b1a1a", bold=True)
        self.target = _format("#0b5cad", underline=True)
        self.mnemonic = _format("#1a237e")
        self.register = _format("#2e6b30")
        self.comment = _format("#7a7a7a")
        self.callee = _format("#6a1b9a")

    def highlightBlock(self, text: str) -> None:
        if LABEL_RE.match(text):
            self.setFormat(0, len(text), self.label)
            return
        for regex, fmt in (
            (MNEMONIC_RE, self.mnemonic),
            (REGISTER_RE, self.register),
            (CALLEE_RE, self.callee),
            (TARGET_RE, self.target),
        ):
            for m in regex.finditer(text):
                self.setFormat(m.start(), m.end() - m.start(), fmt)
        m = COMMENT_RE.search(text)
        if m:
            self.setFormat(m.start(), m.end() - m.start(), self.comment)


class _ListingEdit(QPlainTextEdit):
    """The text area; a click on a branch target asks the owner to jump."""

    targetClicked = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setAcceptDrops(False)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.setFont(monospace_font())
        self.setMouseTracking(True)

    def target_at(self, cursor: QTextCursor) -> str | None:
        """The block name (``bb3``) of the branch target under ``cursor``, if any (not on a label line)."""
        text = cursor.block().text()
        if LABEL_RE.match(text):
            return None
        col = cursor.positionInBlock()
        for m in TARGET_RE.finditer(text):
            if m.start() <= col <= m.end():
                return m.group(1)
        return None

    def mouseReleaseEvent(self, e: QMouseEvent) -> None:
        super().mouseReleaseEvent(e)
        if e.button() == Qt.MouseButton.LeftButton and not self.textCursor().hasSelection():
            target = self.target_at(self.cursorForPosition(e.position().toPoint()))
            if target:
                self.targetClicked.emit(target)

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        super().mouseMoveEvent(e)
        over = self.target_at(self.cursorForPosition(e.position().toPoint())) is not None
        self.viewport().setCursor(Qt.CursorShape.PointingHandCursor if over else Qt.CursorShape.IBeamCursor)


class DisassemblyView(QWidget):
    """Listing of one function: ``set_listing(title, lines)``; ``go_to_label``, ``back``."""

    pcSelected = Signal(object)  # int | None: pc of the line under the cursor

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.toolbar = QToolBar(self)
        self.toolbar.setIconSize(self.toolbar.iconSize() * 0.75)
        self.back_action = self.toolbar.addAction("◀ Back", self.back)
        self.back_action.setShortcut(QKeySequence(Qt.Modifier.ALT | Qt.Key.Key_Left))
        self.back_action.setToolTip("Back to where the last jump started (Alt+Left)")
        self.back_action.setEnabled(False)
        self.title = QLabel(self)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.toolbar.addWidget(self.title)
        self.editor = _ListingEdit(self)
        self.highlighter = DisassemblyHighlighter(self.editor.document())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.editor, 1)
        self.editor.targetClicked.connect(self.go_to_label)
        self.editor.cursorPositionChanged.connect(self._on_cursor_moved)
        self._lines: list[ListingLine] = []
        self._labels: dict[str, int] = {}  # bb name -> line number
        self._history: list[int] = []

    # -- content -------------------------------------------------------------------------------

    def set_listing(self, title: str, lines: list[ListingLine]) -> None:
        self._lines = list(lines)
        self._labels = {}
        for i, line in enumerate(self._lines):
            m = LABEL_RE.match(line.text)
            if m:
                self._labels.setdefault(m.group(1), i)
        self._history.clear()
        self.back_action.setEnabled(False)
        self.title.setText(title)
        self.editor.setPlainText("\n".join(line.text for line in self._lines))
        self.editor.moveCursor(QTextCursor.MoveOperation.Start)

    def text(self) -> str:
        return self.editor.toPlainText()

    @property
    def labels(self) -> dict[str, int]:
        return dict(self._labels)

    def current_line(self) -> int:
        return self.editor.textCursor().blockNumber()

    # -- navigation ----------------------------------------------------------------------------

    def go_to_label(self, name: str) -> bool:
        """Jump to block ``name`` (``bb3`` or ``^bb3``), remembering where we were. False if unknown."""
        line = self._labels.get(name.lstrip("^"))
        if line is None:
            return False
        self._history.append(self.current_line())
        self.back_action.setEnabled(True)
        self._go_to_line(line)
        return True

    def back(self) -> None:
        if self._history:
            self._go_to_line(self._history.pop())
        self.back_action.setEnabled(bool(self._history))

    def go_to_pc(self, pc: int) -> bool:
        for i, line in enumerate(self._lines):
            if line.pc == pc:
                self._go_to_line(i)
                return True
        return False

    def _go_to_line(self, line: int) -> None:
        block = self.editor.document().findBlockByNumber(line)
        cursor = QTextCursor(block)
        self.editor.setTextCursor(cursor)
        # Put the target near the top, like a debugger does, rather than at the bottom edge.
        self.editor.verticalScrollBar().setValue(max(0, line - 3))
        self.editor.setFocus()

    def _on_cursor_moved(self) -> None:
        n = self.current_line()
        pc = self._lines[n].pc if 0 <= n < len(self._lines) else None
        self.pcSelected.emit(pc)
