"""IR viewer for dumps of any size: a virtual text view that paints only the visible lines.

Why not QPlainTextEdit: building a QTextDocument costs several seconds for a 50 MB dump with
megabyte-long constant lines (see ``benchmarks/ir_viewer_open.py``). Here the text stays one ``bytes``
object indexed with numpy (``IrDocument``); a paint decodes and highlights only the lines on screen, so
opening is the cost of one ``np.flatnonzero`` over the bytes and scrolling costs the same at any size.

Features: MLIR highlighting, line numbers, find next/previous with every visible match marked, fold
brace regions (click the margin, Ctrl+Shift+[ / ]), go to definition (Ctrl+click or F12 on
``@symbol`` / ``%value``; Alt+Left goes back), selection and copy, per-line background colours (the
diff view uses them), and custom line numbers (the diff's filler lines have none).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QFontMetricsF,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QShortcut,
)
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.views.ir_document import IrDocument, Match
from app.views.ir_mlir_syntax import KIND_BOLD, KIND_COLORS, token_at, tokenize

# Lines longer than this are drawn cut, with a note of what is left out (IREE prints constants such as
# embedded ELF binaries as one hex line of many megabytes).
MAX_DRAWN_COLUMNS = 20000
_TEXT_COLOR = QColor("#1f1f1f")
_GUTTER_BG = QColor("#f3f3f3")
_GUTTER_FG = QColor("#8a8a8a")
_CURRENT_LINE = QColor("#fff8d0")
_SELECTION = QColor("#add6ff")
_MATCH = QColor("#fff176")
_CURRENT_MATCH = QColor("#ff9632")
_FOLD_MARK = QColor("#5a5a5a")


class IrTextView(QAbstractScrollArea):
    """Read-only, virtual, highlighted view of an ``IrDocument``."""

    cursorMoved = Signal(int)  # 0-based line of the cursor
    definitionNotFound = Signal(str)
    foldingChanged = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.setFont(font)
        self._bold = QFont(font)
        self._bold.setWeight(QFont.Weight.DemiBold)
        self._italic = QFont(font)
        self._italic.setItalic(True)
        self._colors = {k: QColor(v) for k, v in KIND_COLORS.items()}
        self.viewport().setCursor(Qt.CursorShape.IBeamCursor)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._gutter_widget = _Gutter(self)
        self.verticalScrollBar().valueChanged.connect(self._refresh)
        self.horizontalScrollBar().valueChanged.connect(self._refresh)
        self._doc = IrDocument(b"")
        self._folded: set[int] = set()
        self._visible = np.zeros(0, np.int64)  # document line of each row
        self._cursor = (0, 0)
        self._anchor: tuple[int, int] | None = None
        self._match: Match | None = None
        self._needle = ""
        self._needle_case = False
        self._line_colors: np.ndarray | None = None
        self._palette: dict[int, QColor] = {}
        self._line_numbers: np.ndarray | None = None
        self._history: list[int] = []
        self._update_metrics()
        self.set_document(self._doc)

    # -- document ----------------------------------------------------------------------------------------
    def set_document(self, doc: IrDocument) -> None:
        self._doc = doc
        self._folded.clear()
        self._cursor, self._anchor, self._match = (0, 0), None, None
        self._line_colors = self._line_numbers = None
        self._history.clear()
        self._recompute_visible()
        self._update_metrics()
        self.verticalScrollBar().setValue(0)
        self.horizontalScrollBar().setValue(0)

    def document(self) -> IrDocument:
        return self._doc

    def set_line_colors(self, colors: np.ndarray | None, palette: dict[int, QColor] | None = None) -> None:
        """Background colour class per line (0 = none) and the colour of each class."""
        self._line_colors = colors
        self._palette = dict(palette or {})
        self._refresh()

    def set_line_numbers(self, numbers: np.ndarray | None) -> None:
        """The number shown for each line (1-based; 0 or less shows none); None shows i + 1."""
        self._line_numbers = numbers
        self._update_metrics()
        self._refresh()

    # -- geometry ----------------------------------------------------------------------------------------
    def _update_metrics(self) -> None:
        fm = self.fontMetrics()
        self._lh = fm.height()
        # the true (fractional) advance: rounding it would drift glyphs apart along a line
        self._cw = max(1.0, QFontMetricsF(self.font()).horizontalAdvance("M" * 100) / 100)
        self._ascent = fm.ascent()
        n = self._doc.line_count if self._line_numbers is None else int(self._line_numbers.max(initial=0))
        self._fold_w = int(self._cw) + 8
        self._gutter = int(self._cw * (len(str(max(n, 1))) + 1)) + self._fold_w
        self.setViewportMargins(self._gutter, 0, 0, 0)
        self._place_gutter()
        self._update_scrollbars()

    def _update_scrollbars(self) -> None:
        rows = self.rows_per_page()
        vs = self.verticalScrollBar()
        vs.setRange(0, max(0, len(self._visible) - rows + 1))
        vs.setPageStep(rows)
        vs.setSingleStep(1)
        hs = self.horizontalScrollBar()
        width = int(min(self._doc.max_line_length, MAX_DRAWN_COLUMNS + 40) * self._cw)
        hs.setRange(0, max(0, width - self.viewport().width() + int(2 * self._cw)))
        hs.setPageStep(max(1, self.viewport().width()))
        hs.setSingleStep(int(self._cw * 4))

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._place_gutter()
        self._update_scrollbars()

    def _place_gutter(self) -> None:
        vp = self.viewport().geometry()
        self._gutter_widget.setGeometry(vp.x() - self._gutter, vp.y(), self._gutter, vp.height())

    def rows_per_page(self) -> int:
        return max(1, self.viewport().height() // max(1, self._lh))

    def first_visible_line(self) -> int:
        row = self.verticalScrollBar().value()
        return int(self._visible[row]) if row < len(self._visible) else 0

    def visible_lines(self) -> np.ndarray:
        """Document lines on screen now, top to bottom."""
        row = self.verticalScrollBar().value()
        return self._visible[row : row + self.rows_per_page() + 1]

    def row_of_line(self, line: int) -> int:
        """Row of ``line`` among the unfolded lines (or of the folded line that hides it)."""
        return max(0, int(np.searchsorted(self._visible, line, side="right")) - 1)

    def scroll_to_line(self, line: int, center: bool = True) -> None:
        row = self.row_of_line(line)
        top = self.verticalScrollBar().value()
        rows = self.rows_per_page()
        if center:
            self.verticalScrollBar().setValue(max(0, row - rows // 2))
        elif row < top:
            self.verticalScrollBar().setValue(row)
        elif row >= top + rows:
            self.verticalScrollBar().setValue(row - rows + 1)

    def _ensure_column_visible(self, col: int) -> None:
        hs = self.horizontalScrollBar()
        x = int(col * self._cw)
        if x < hs.value() or x > hs.value() + self.viewport().width() - 4 * self._cw:
            hs.setValue(max(0, x - self.viewport().width() // 3))

    # -- folding -----------------------------------------------------------------------------------------
    def _recompute_visible(self) -> None:
        n = self._doc.line_count
        if not self._folded:
            self._visible = np.arange(n, dtype=np.int64)
        else:
            delta = np.zeros(n + 1, np.int32)
            for a in self._folded:
                b = self._doc.fold_end_of(a)
                delta[a + 1] += 1
                delta[b + 1] -= 1
            self._visible = np.flatnonzero(np.cumsum(delta[:n]) == 0)
        self._update_scrollbars()
        self._refresh()

    def is_line_visible(self, line: int) -> bool:
        """Whether ``line`` is shown (not hidden inside a folded region)."""
        i = int(np.searchsorted(self._visible, line))
        return i < len(self._visible) and int(self._visible[i]) == line

    def is_folded(self, line: int) -> bool:
        return line in self._folded

    def fold(self, line: int) -> bool:
        """Fold the region opened on ``line``, or the innermost region containing it; True if one folded."""
        if self._doc.fold_end_of(line) is None:
            region = self._doc.enclosing_region(line)
            if region is None:
                return False
            line = region[0]
        self._folded.add(line)
        self._recompute_visible()
        if not self.is_line_visible(self._cursor[0]):
            self._cursor = (line, 0)
        self.foldingChanged.emit()
        return True

    def unfold(self, line: int) -> bool:
        """Unfold the region on ``line`` and any folded region hiding it."""
        changed = line in self._folded
        self._folded.discard(line)
        for a in list(self._folded):
            if a < line <= self._doc.fold_end_of(a):
                self._folded.discard(a)
                changed = True
        if changed:
            self._recompute_visible()
            self.foldingChanged.emit()
        return changed

    def toggle_fold(self, line: int) -> None:
        if line in self._folded:
            self.unfold(line)
        elif self._doc.fold_end_of(line) is not None:
            self.fold(line)

    def fold_all(self, depth: int = 1) -> None:
        """Fold every region nested ``depth`` levels deep (1 = the regions just inside the outermost)."""
        starts, ends = self._doc.fold_start, self._doc.fold_end
        # nesting depth of each region = number of regions that strictly contain it
        level = np.zeros(len(starts), np.int64)
        for a, b in zip(starts.tolist(), ends.tolist()):
            level += (starts > a) & (ends <= b)
        self._folded = set(starts[level == depth].tolist())
        self._recompute_visible()
        self.foldingChanged.emit()

    def unfold_all(self) -> None:
        self._folded.clear()
        self._recompute_visible()
        self.foldingChanged.emit()

    # -- cursor, search, definitions --------------------------------------------------------------------
    def cursor_position(self) -> tuple[int, int]:
        return self._cursor

    def go_to_line(self, line: int, col: int = 0, length: int = 0, remember: bool = False) -> None:
        """Put the cursor on ``line:col`` (0-based), unfolding what hides it, and scroll it into view."""
        if self._doc.line_count == 0:
            return
        line = max(0, min(line, self._doc.line_count - 1))
        if remember:
            self._history.append(self._cursor[0])
        if not self.is_line_visible(line):
            for a in sorted(self._folded):
                if a < line <= self._doc.fold_end_of(a):
                    self._folded.discard(a)
            self._recompute_visible()
            self.foldingChanged.emit()
        self._cursor, self._anchor = (line, col), None
        self._match = Match(line, col, col + length) if length else None
        self.scroll_to_line(line)
        self._ensure_column_visible(col)
        self._refresh()
        self.cursorMoved.emit(line)

    def go_back(self) -> bool:
        if not self._history:
            return False
        self.go_to_line(self._history.pop())
        return True

    def set_search(self, needle: str, case: bool = False) -> None:
        """Mark every occurrence of ``needle`` on screen (matching is done per painted line)."""
        self._needle, self._needle_case = needle, case
        self._refresh()

    def find(self, needle: str, backward: bool = False, case: bool = False) -> Match | None:
        self.set_search(needle, case)
        line, col = self._cursor
        if self._match is not None and not backward:
            col = self._match.end if self._match.line == line else col
        m = self._doc.find(needle, line, col, backward=backward, case=case)
        if m is not None:
            self.go_to_line(m.line, m.start, m.end - m.start)
        return m

    def definition_of(self, name: str, line: int) -> int | None:
        if name.startswith("@"):
            return self._doc.symbol_definition(name)
        if name.startswith("%"):
            return self._doc.value_definition(name, line)
        return None

    def go_to_definition(self, line: int | None = None, col: int | None = None) -> int | None:
        """Jump to the definition of the ``@symbol``/``%value`` at ``line:col`` (default: the cursor)."""
        if line is None or col is None:
            line, col = self._cursor
        name = token_at(self._doc.line(line, col + 4096), col)
        target = self.definition_of(name, line) if name else None
        if target is None:
            self.definitionNotFound.emit(name or "")
            return None
        text = self._doc.line(target, 8192)
        c = text.find(name)
        self._history.append(line)  # Alt+Left comes back to where the name was clicked
        self.go_to_line(target, max(c, 0), len(name) if c >= 0 else 0)
        return target

    def selected_text(self) -> str:
        if self._anchor is None or self._anchor == self._cursor:
            return ""
        (l0, c0), (l1, c1) = sorted([self._anchor, self._cursor])
        if l0 == l1:
            return self._doc.line(l0)[c0:c1]
        parts = [self._doc.line(l0)[c0:]]
        parts += [self._doc.line(i) for i in range(l0 + 1, l1)]
        parts.append(self._doc.line(l1)[:c1])
        return "\n".join(parts)

    # -- painting ----------------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:  # noqa: N802
        p = QPainter(self.viewport())
        vw, vh = self.viewport().width(), self.viewport().height()
        p.fillRect(0, 0, vw, vh, QColor("white"))
        hx = self.horizontalScrollBar().value()
        col0 = int(hx / self._cw)
        ncols = int(vw / self._cw) + 2
        x0 = col0 * self._cw - hx
        sel = sorted([self._anchor, self._cursor]) if self._anchor and self._anchor != self._cursor else None
        needle = self._needle if self._needle_case else self._needle.lower()
        for r, line in enumerate(self.visible_lines().tolist()):
            y = r * self._lh
            if self._line_colors is not None and line < len(self._line_colors):
                cls = int(self._line_colors[line])
                if cls in self._palette:
                    p.fillRect(0, y, vw, self._lh, self._palette[cls])
            if line == self._cursor[0] and self._line_colors is None:
                p.fillRect(0, y, vw, self._lh, _CURRENT_LINE)
            full_len = int(self._doc.ends[line] - self._doc.starts[line])
            text = self._doc.line(line, min(MAX_DRAWN_COLUMNS, col0 + ncols + 256))
            if sel is not None and sel[0][0] <= line <= sel[1][0]:
                a = sel[0][1] if line == sel[0][0] else 0
                b = sel[1][1] if line == sel[1][0] else len(text) + 1
                p.fillRect(QRectF(x0 + (a - col0) * self._cw, y, (b - a) * self._cw, self._lh), _SELECTION)
            if needle:
                hay = text if self._needle_case else text.lower()
                i = hay.find(needle, max(0, col0 - len(needle)))
                while 0 <= i < col0 + ncols:
                    p.fillRect(
                        QRectF(x0 + (i - col0) * self._cw, y, len(needle) * self._cw, self._lh), _MATCH
                    )
                    i = hay.find(needle, i + max(1, len(needle)))
            m = self._match
            if m is not None and m.line == line:
                w = (m.end - m.start) * self._cw
                p.fillRect(QRectF(x0 + (m.start - col0) * self._cw, y, w, self._lh), _CURRENT_MATCH)
            self._paint_line(p, text, col0, ncols, x0, y + self._ascent)
            tail = None
            if line in self._folded:
                tail = f"  {{ … {self._doc.fold_end_of(line) - line} lines }}"
            elif full_len > MAX_DRAWN_COLUMNS and len(text) >= MAX_DRAWN_COLUMNS:
                tail = f"  … {full_len - MAX_DRAWN_COLUMNS} more bytes"
            if tail and len(text) < col0 + ncols:
                p.setPen(_FOLD_MARK)
                p.setFont(self._italic)
                p.drawText(QPointF(x0 + (len(text) - col0) * self._cw, y + self._ascent), tail)
        if self.hasFocus() and self.is_line_visible(self._cursor[0]):
            r = self.row_of_line(self._cursor[0]) - self.verticalScrollBar().value()
            cx = x0 + (self._cursor[1] - col0) * self._cw
            p.fillRect(QRectF(cx, r * self._lh, 1, self._lh), QColor("black"))
        p.end()

    @staticmethod
    def line_runs(text: str, col0: int, ncols: int) -> tuple[int, str, list[tuple[int, int, int]]]:
        """What one line paints from column ``col0``, ``ncols`` wide: ``(lo, seg, runs)``, ``seg`` the text
        tokenized from column ``lo`` and ``runs`` its ``(start, end, kind)`` spans in ``seg`` (kind -1: plain
        text). The tokenizer reads a little beyond both edges, so a token the viewport's edge cuts keeps the
        colour it has in full (``x.float32`` cut to ``x.flo`` or ``x`` still reads as one token)."""
        lo = max(0, col0 - 256)
        seg = text[lo : col0 + ncols + 256]
        runs: list[tuple[int, int, int]] = []
        pos = 0
        for start, length, kind in [*tokenize(seg), (len(seg), 0, -1)]:
            if start > pos:
                runs.append((pos, start, -1))
            if length:
                runs.append((start, start + length, kind))
            pos = start + length
        return lo, seg, runs

    def _paint_line(self, p: QPainter, text: str, col0: int, ncols: int, x0: int, baseline: int) -> None:
        lo, seg, runs = self.line_runs(text, col0, ncols)
        end = col0 + ncols - lo  # nothing right of the viewport is drawn
        for start, stop, kind in runs:
            if start >= end:
                break
            if kind < 0:
                self._draw_run(p, seg, start, min(stop, end), lo, col0, x0, baseline, _TEXT_COLOR, self.font())
                continue
            font = self._bold if kind in KIND_BOLD else (self._italic if kind == 0 else self.font())
            self._draw_run(p, seg, start, min(stop, end), lo, col0, x0, baseline, self._colors[kind], font)

    def _draw_run(self, p, seg, a, b, lo, col0, x0, baseline, color, font) -> None:
        a2 = max(a, col0 - lo)
        if a2 >= b:
            return
        p.setPen(color)
        p.setFont(font)
        p.drawText(QPointF(x0 + (lo + a2 - col0) * self._cw, baseline), seg[a2:b])

    def _refresh(self) -> None:
        self.viewport().update()
        self._gutter_widget.update()

    def paint_gutter(self, p: QPainter) -> None:
        """Line numbers and fold markers, painted by the gutter widget left of the viewport."""
        h = self.viewport().height()
        top = 0
        p.fillRect(0, top, self._gutter, h, _GUTTER_BG)
        p.setFont(self.font())
        num_w = self._gutter - self._fold_w
        for r, line in enumerate(self.visible_lines().tolist()):
            y = top + r * self._lh
            n = line + 1 if self._line_numbers is None else int(self._line_numbers[line])
            if n > 0:
                p.setPen(_GUTTER_FG if line != self._cursor[0] else _TEXT_COLOR)
                p.drawText(
                    QRect(0, y, num_w - int(self._cw) // 2, self._lh), Qt.AlignmentFlag.AlignRight, str(n)
                )
            if self._doc.fold_end_of(line) is not None:
                p.setPen(_FOLD_MARK)
                p.drawText(
                    QRect(num_w, y, self._fold_w, self._lh),
                    Qt.AlignmentFlag.AlignCenter,
                    "▸" if line in self._folded else "▾",
                )

    # -- input -------------------------------------------------------------------------------------------
    def _pos_at(self, pt: QPoint) -> tuple[int, int]:
        row = self.verticalScrollBar().value() + max(0, pt.y()) // self._lh
        row = min(row, len(self._visible) - 1)
        line = int(self._visible[row]) if row >= 0 else 0
        col = max(0, int((pt.x() + self.horizontalScrollBar().value()) / self._cw + 0.5))
        return line, min(col, len(self._doc.line(line, col + 8)))

    def line_at_gutter_y(self, y: int) -> int | None:
        """Document line drawn at height ``y`` of the viewport (the gutter uses the same rows)."""
        row = self.verticalScrollBar().value() + y // self._lh
        return int(self._visible[row]) if 0 <= row < len(self._visible) else None

    def mousePressEvent(self, e) -> None:  # noqa: N802
        if e.button() != Qt.MouseButton.LeftButton or self._doc.line_count == 0:
            return super().mousePressEvent(e)
        line, col = self._pos_at(e.position().toPoint())
        if e.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.go_to_definition(line, max(0, col - 1) if col else col)
            return
        self._cursor = (line, col)
        self._anchor = (
            (line, col) if not (e.modifiers() & Qt.KeyboardModifier.ShiftModifier) else self._anchor
        )
        self._match = None
        self._refresh()
        self.cursorMoved.emit(line)

    def mouseMoveEvent(self, e) -> None:  # noqa: N802
        if e.buttons() & Qt.MouseButton.LeftButton and self._doc.line_count:
            self._cursor = self._pos_at(e.position().toPoint())
            self._refresh()

    def mouseDoubleClickEvent(self, e) -> None:  # noqa: N802
        line, col = self._pos_at(e.position().toPoint())
        self.toggle_fold(line) if self._doc.fold_end_of(line) is not None and col == 0 else None

    def gutter_click(self, y: int) -> None:
        line = self.line_at_gutter_y(y)
        if line is not None:
            self.toggle_fold(line)

    def keyPressEvent(self, e) -> None:  # noqa: N802
        line, col = self._cursor
        key, mods = e.key(), e.modifiers()
        ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
        if e.matches(QKeySequence.StandardKey.Copy):
            QGuiApplication.clipboard().setText(self.selected_text())
            return
        if e.matches(QKeySequence.StandardKey.SelectAll):
            last = self._doc.line_count - 1
            self._anchor, self._cursor = (0, 0), (last, len(self._doc.line(last)))
            self._refresh()
            return
        row = self.row_of_line(line)
        moves = {
            Qt.Key.Key_Up: row - 1,
            Qt.Key.Key_Down: row + 1,
            Qt.Key.Key_PageUp: row - self.rows_per_page(),
            Qt.Key.Key_PageDown: row + self.rows_per_page(),
        }
        if key in moves:
            r = max(0, min(len(self._visible) - 1, moves[key]))
            self._move_cursor(int(self._visible[r]), col, mods)
        elif key == Qt.Key.Key_Home:
            self._move_cursor(0 if ctrl else line, 0, mods)
        elif key == Qt.Key.Key_End:
            ln = self._doc.line_count - 1 if ctrl else line
            self._move_cursor(ln, len(self._doc.line(ln, MAX_DRAWN_COLUMNS)), mods)
        elif key == Qt.Key.Key_Left and not (mods & Qt.KeyboardModifier.AltModifier):
            self._move_cursor(line, max(0, col - 1), mods)
        elif key == Qt.Key.Key_Right:
            self._move_cursor(line, col + 1, mods)
        else:
            super().keyPressEvent(e)

    def _move_cursor(self, line: int, col: int, mods) -> None:
        if mods & Qt.KeyboardModifier.ShiftModifier:
            self._anchor = self._anchor or self._cursor
        else:
            self._anchor = None
        self._cursor = (line, col)
        self._match = None
        self.scroll_to_line(line, center=False)
        self._ensure_column_visible(col)
        self._refresh()
        self.cursorMoved.emit(line)


class _Gutter(QWidget):
    """The line-number margin left of the text; a click on a fold marker folds or unfolds."""

    def __init__(self, view: IrTextView):
        super().__init__(view)
        self._view = view
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def paintEvent(self, e) -> None:  # noqa: N802
        p = QPainter(self)
        self._view.paint_gutter(p)
        p.end()

    def mousePressEvent(self, e) -> None:  # noqa: N802
        self._view.gutter_click(int(e.position().y()))


class IrViewer(QWidget):
    """An ``IrTextView`` with a find bar and a status line; the panel shown for a phase or any IR file."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.view = IrTextView(self)
        self.find_edit = QLineEdit(self)
        self.find_edit.setPlaceholderText("Find (Enter: next, Shift+Enter: previous)")
        self.find_edit.setClearButtonEnabled(True)
        self.case_box = QCheckBox("Aa", self)
        self.case_box.setToolTip("Match case")
        prev_btn, next_btn = QToolButton(self), QToolButton(self)
        prev_btn.setText("▲")
        next_btn.setText("▼")
        prev_btn.setToolTip("Previous match (Shift+F3)")
        next_btn.setToolTip("Next match (F3)")
        self.status = QLabel(self)
        bar = QHBoxLayout()
        bar.setContentsMargins(2, 2, 2, 2)
        bar.addWidget(self.find_edit, 1)
        bar.addWidget(self.case_box)
        bar.addWidget(prev_btn)
        bar.addWidget(next_btn)
        bar.addWidget(self.status)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(self.view, 1)
        self.title = ""
        self.find_edit.returnPressed.connect(self._find_from_edit)
        self.find_edit.textChanged.connect(lambda t: self.view.set_search(t, self.case_box.isChecked()))
        next_btn.clicked.connect(lambda: self.find_next())
        prev_btn.clicked.connect(lambda: self.find_previous())
        self.view.definitionNotFound.connect(
            lambda n: self.status.setText(f"no definition of {n}" if n else "")
        )
        self.view.cursorMoved.connect(self._show_position)
        ctx = Qt.ShortcutContext.WidgetWithChildrenShortcut
        for seq, fn in (
            (QKeySequence.StandardKey.Find, self._focus_find),
            (QKeySequence("F3"), self.find_next),
            (QKeySequence("Shift+F3"), self.find_previous),
            (QKeySequence("F12"), lambda: self.view.go_to_definition()),
            (QKeySequence("Alt+Left"), self.view.go_back),
            (QKeySequence("Ctrl+Shift+["), lambda: self.view.fold(self.view.cursor_position()[0])),
            (QKeySequence("Ctrl+Shift+]"), lambda: self.view.unfold(self.view.cursor_position()[0])),
            (QKeySequence("Ctrl+G"), self._focus_find),
        ):
            QShortcut(seq, self, fn, context=ctx)

    # -- content -----------------------------------------------------------------------------------------
    def set_document(self, doc: IrDocument, title: str = "") -> None:
        self.view.set_document(doc)
        self.title = title
        self.status.setText(f"{title}  {doc.line_count:,} lines" if title else f"{doc.line_count:,} lines")

    def set_text(self, text: str, title: str = "") -> None:
        self.set_document(IrDocument.from_text(text), title)

    def open_file(self, path: str | Path) -> None:
        self.set_document(IrDocument.from_file(path), Path(path).name)

    def document(self) -> IrDocument:
        return self.view.document()

    def go_to_line(self, line: int, col: int = 0) -> None:
        """Show ``line`` (0-based) with the cursor on it."""
        self.view.go_to_line(line, col)

    # -- find --------------------------------------------------------------------------------------------
    def _focus_find(self) -> None:
        self.find_edit.setFocus()
        self.find_edit.selectAll()

    def _find_from_edit(self) -> None:
        back = bool(QGuiApplication.keyboardModifiers() & Qt.KeyboardModifier.ShiftModifier)
        self.find_previous() if back else self.find_next()

    def find_next(self, needle: str | None = None) -> Match | None:
        return self._find(needle, backward=False)

    def find_previous(self, needle: str | None = None) -> Match | None:
        return self._find(needle, backward=True)

    def _find(self, needle: str | None, backward: bool) -> Match | None:
        if needle is not None and needle != self.find_edit.text():
            self.find_edit.setText(needle)
        text = self.find_edit.text()
        m = self.view.find(text, backward=backward, case=self.case_box.isChecked())
        if text and m is None:
            self.status.setText(f"“{text}” not found")
        return m

    def _show_position(self, line: int) -> None:
        self.status.setText(f"{self.title}  line {line + 1} of {self.document().line_count:,}".strip())
