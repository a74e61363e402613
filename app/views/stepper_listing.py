"""The stepper's disassembly: one function's listing with a breakpoint margin and the current pc marked.

The margin shows a red dot on each line with an instruction breakpoint and a yellow arrow on the line
that runs next; a click in the margin asks to toggle the breakpoint of that line (``marginClicked``).
The current line is painted across the whole width (yellow for the innermost frame, green for a caller
frame the user selected, as debuggers do) and scrolled into view.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPolygonF, QTextCursor, QTextFormat
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QWidget

from app.views.disassembly_view import (
    CALLEE_RE,
    COMMENT_RE,
    LABEL_RE,
    MNEMONIC_RE,
    REGISTER_RE,
    TARGET_RE,
    DisassemblyHighlighter,
    ListingLine,
)
from app.views.hex_view import monospace_font

CURRENT_COLOR = QColor("#fff2a8")  # the innermost frame's next instruction
CALLER_COLOR = QColor("#d4f0d4")  # a caller's pc (the call it waits on)
BREAK_COLOR = QColor("#d83b3b")
MARGIN_BG = QColor("#f0f0f0")


PREFIX = 8  # "00012A  ": the pc column before each line's text


class _Highlighter(DisassemblyHighlighter):
    """The inspector's colours, shifted past the pc column (which is grey)."""

    def highlightBlock(self, text: str) -> None:
        self.setFormat(0, min(PREFIX, len(text)), self.comment)
        body = text[PREFIX:]
        if LABEL_RE.match(body):
            self.setFormat(PREFIX, len(body), self.label)
            return
        for regex, fmt in (
            (MNEMONIC_RE, self.mnemonic),
            (REGISTER_RE, self.register),
            (CALLEE_RE, self.callee),
            (TARGET_RE, self.target),
        ):
            for m in regex.finditer(body):
                self.setFormat(PREFIX + m.start(), m.end() - m.start(), fmt)
        m = COMMENT_RE.search(body)
        if m:
            self.setFormat(PREFIX + m.start(), m.end() - m.start(), self.comment)


class _Margin(QWidget):
    def __init__(self, editor: StepperListing):
        super().__init__(editor)
        self.editor = editor
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Click to set or clear a breakpoint (F9)")

    def sizeHint(self) -> QSize:
        return QSize(self.editor.margin_width(), 0)

    def paintEvent(self, event: QPaintEvent) -> None:
        self.editor.paint_margin(self, event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            cursor = self.editor.cursorForPosition(event.position().toPoint() + self.editor.viewport().pos())
            line = cursor.blockNumber()
            self.editor.marginClicked.emit(line)


class StepperListing(QPlainTextEdit):
    """``set_listing(lines)``, ``set_current(pc, innermost)``, ``set_breakpoint_pcs(pcs)``."""

    marginClicked = Signal(int)  # line number

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("stepperListing")
        self.setReadOnly(True)
        self.setAcceptDrops(False)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(monospace_font())
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.highlighter = _Highlighter(self.document())
        self.margin = _Margin(self)
        self.lines: list[ListingLine] = []
        self._line_of_pc: dict[int, int] = {}
        self.breakpoint_pcs: set[int] = set()
        self.current_pc: int | None = None
        self.current_is_innermost = True
        self.blockCountChanged.connect(lambda _: self._update_margin_width())
        self.updateRequest.connect(self._on_update_request)
        self._update_margin_width()

    # -- content --------------------------------------------------------------------------------

    def set_listing(self, lines: list[ListingLine]) -> None:
        self.lines = list(lines)
        self._line_of_pc = {}
        for i, line in enumerate(self.lines):
            if line.pc is not None:
                # A block label and its first instruction can share a pc: the instruction wins.
                if line.pc not in self._line_of_pc or not line.text.lstrip().startswith("^"):
                    self._line_of_pc[line.pc] = i
        self.current_pc = None
        self.setPlainText("\n".join(self._display(line) for line in self.lines))
        self._highlight()

    def replace_text(self, lines: list[ListingLine]) -> None:
        """The same function's lines with other text (global names added): the current line, its kind and the
        scroll position stay."""
        pc, innermost = self.current_pc, self.current_is_innermost
        scroll = self.verticalScrollBar().value()
        self.set_listing(lines)
        self.current_pc, self.current_is_innermost = pc, innermost
        self._highlight()
        self.verticalScrollBar().setValue(scroll)

    @staticmethod
    def _display(line: ListingLine) -> str:
        prefix = f"{line.pc:06X}  " if line.pc is not None else " " * PREFIX
        return prefix + line.text

    def line_of_pc(self, pc: int) -> int | None:
        return self._line_of_pc.get(pc)

    def pc_of_line(self, line: int) -> int | None:
        if 0 <= line < len(self.lines):
            pc = self.lines[line].pc
            if pc is not None and self.lines[line].text.lstrip().startswith("^"):
                return None  # labels are not instructions one can stop on
            return pc
        return None

    def instruction_before(self, pc: int) -> int:
        """The pc of the instruction that ends where ``pc`` starts (``pc`` itself if none is listed)."""
        before = [p for p in self._line_of_pc if p < pc and self.pc_of_line(self._line_of_pc[p]) is not None]
        return max(before) if before else pc

    def cursor_pc(self) -> int | None:
        return self.pc_of_line(self.textCursor().blockNumber())

    def current_line(self) -> int | None:
        return None if self.current_pc is None else self.line_of_pc(self.current_pc)

    def set_current(self, pc: int | None, innermost: bool = True) -> None:
        """Mark the line of ``pc`` and scroll it into view (a few lines of context above)."""
        self.current_pc = pc
        self.current_is_innermost = innermost
        line = self.current_line()
        if line is not None:
            block = self.document().findBlockByNumber(line)
            self.setTextCursor(QTextCursor(block))
            bar = self.verticalScrollBar()
            first = bar.value()
            visible = max(1, self.viewport().height() // max(1, self.fontMetrics().height()) - 1)
            if not first + 1 <= line <= first + visible - 3:
                bar.setValue(max(0, line - 4))
        self._highlight()

    def set_breakpoint_pcs(self, pcs: set[int]) -> None:
        self.breakpoint_pcs = set(pcs)
        self.margin.update()

    def is_line_visible(self, line: int) -> bool:
        block = self.document().findBlockByNumber(line)
        top = self.blockBoundingGeometry(block).translated(self.contentOffset()).top()
        return 0 <= top <= self.viewport().height() - self.fontMetrics().height()

    # -- painting -------------------------------------------------------------------------------

    def _highlight(self) -> None:
        selections = []
        line = self.current_line()
        if line is not None:
            sel = QTextEdit.ExtraSelection()
            sel.format.setBackground(CURRENT_COLOR if self.current_is_innermost else CALLER_COLOR)
            sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            sel.cursor = QTextCursor(self.document().findBlockByNumber(line))
            selections.append(sel)
        self.setExtraSelections(selections)
        self.margin.update()

    def margin_width(self) -> int:
        return self.fontMetrics().height() * 2 + 4

    def _update_margin_width(self) -> None:
        self.setViewportMargins(self.margin_width(), 0, 0, 0)

    def _on_update_request(self, rect: QRect, dy: int) -> None:
        if dy:
            self.margin.scroll(0, dy)
        else:
            self.margin.update(0, rect.y(), self.margin.width(), rect.height())

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - QResizeEvent
        super().resizeEvent(event)
        cr = self.contentsRect()
        self.margin.setGeometry(QRect(cr.left(), cr.top(), self.margin_width(), cr.height()))

    def paint_margin(self, margin: QWidget, event: QPaintEvent) -> None:
        painter = QPainter(margin)
        painter.fillRect(event.rect(), MARGIN_BG)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        block = self.firstVisibleBlock()
        top = self.blockBoundingGeometry(block).translated(self.contentOffset()).top()
        h = self.fontMetrics().height()
        current = self.current_line()
        while block.isValid() and top <= event.rect().bottom():
            n = block.blockNumber()
            pc = self.pc_of_line(n)
            if pc is not None and pc in self.breakpoint_pcs:
                d = h - 4
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(BREAK_COLOR)
                painter.drawEllipse(3, int(top) + 2, d, d)
            if n == current:
                x0, y0 = h - 2, int(top) + 2
                arrow = QPolygonF()
                for px, py in ((x0, y0 + 2), (x0 + h * 0.55, y0 + 2), (x0 + h * 0.55, y0 - 1),
                               (x0 + h, y0 + (h - 4) / 2), (x0 + h * 0.55, y0 + h - 3),
                               (x0 + h * 0.55, y0 + h - 6), (x0, y0 + h - 6)):  # fmt: skip
                    arrow.append(QPointF(px, py))
                painter.setPen(QColor("#8a6d00"))
                painter.setBrush(QColor("#f5c400") if self.current_is_innermost else QColor("#5cb85c"))
                painter.drawPolygon(arrow)
            block = block.next()
            top += self.blockBoundingRect(block).height() if block.isValid() else h
        painter.end()
