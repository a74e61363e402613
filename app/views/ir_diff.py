"""Side-by-side diff of two IR texts (two phases, or one phase of two compilations).

Lines are compared by hash: numpy trims the common head and tail (most of a big dump between nearby
phases), then difflib aligns what is left. Both sides become aligned documents (filler rows where one
side has no line), shown in two ``IrTextView``s that scroll together; changed rows are coloured and
next/previous change jump between regions.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QToolButton, QVBoxLayout, QWidget

from app.views.elided_label import ElidedLabel
from app.views.ir_document import IrDocument
from app.views.ir_viewer import IrTextView

# Above this many differing lines per side (after trimming the common head and tail) difflib's cost
# grows too much for an interactive view; the middle is then shown as one replaced block.
MAX_DIFF_LINES = 200_000

SAME, CHANGED, DELETED, INSERTED, FILLER = range(5)
_PALETTE = {
    CHANGED: QColor("#fff1c2"),
    DELETED: QColor("#ffd7d5"),
    INSERTED: QColor("#d4f7d4"),
    FILLER: QColor("#ececec"),
}


@dataclass
class AlignedDiff:
    """Two texts aligned row by row: ``left_kind``/``right_kind`` colour each row, ``*_numbers`` are the
    1-based original line numbers (0 on filler rows), ``changes`` the row ranges ``[start, end)`` of
    each changed region."""

    left: IrDocument
    right: IrDocument
    left_kind: np.ndarray
    right_kind: np.ndarray
    left_numbers: np.ndarray
    right_numbers: np.ndarray
    changes: list[tuple[int, int]]
    truncated: bool = False

    def changed_lines(self, side: str) -> set[int]:
        """0-based original lines of ``side`` (``left``/``right``) that are not equal to a line opposite."""
        kind = self.left_kind if side == "left" else self.right_kind
        nums = self.left_numbers if side == "left" else self.right_numbers
        rows = np.flatnonzero((kind != SAME) & (kind != FILLER))
        return set((nums[rows] - 1).tolist())


def _split(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def diff_texts(left: str | bytes, right: str | bytes, max_lines: int = MAX_DIFF_LINES) -> AlignedDiff:
    """Align ``left`` and ``right`` line by line."""
    a = _split(left.encode("utf-8") if isinstance(left, str) else left)
    b = _split(right.encode("utf-8") if isinstance(right, str) else right)
    ha = np.fromiter((hash(x) for x in a), np.int64, len(a))
    hb = np.fromiter((hash(x) for x in b), np.int64, len(b))
    n = min(len(a), len(b))
    neq = np.flatnonzero(ha[:n] != hb[:n])
    head = int(neq[0]) if len(neq) else n
    m = min(len(a), len(b)) - head
    neq = np.flatnonzero(ha[len(a) - m :][::-1] != hb[len(b) - m :][::-1]) if m > 0 else np.zeros(0)
    tail = int(neq[0]) if len(neq) else m
    mid_a, mid_b = ha[head : len(a) - tail], hb[head : len(b) - tail]
    truncated = False
    if len(mid_a) > max_lines or len(mid_b) > max_lines:
        ops = [("replace", 0, len(mid_a), 0, len(mid_b))] if len(mid_a) or len(mid_b) else []
        truncated = True
    else:
        sm = difflib.SequenceMatcher(None, mid_a.tolist(), mid_b.tolist(), autojunk=False)
        ops = sm.get_opcodes()
    rows_a: list[int] = []  # original index or -1 per aligned row
    rows_b: list[int] = []
    kinds: list[int] = []
    changes: list[tuple[int, int]] = []

    def emit(ia, ib, kind):
        rows_a.append(ia)
        rows_b.append(ib)
        kinds.append(kind)

    rows_a.extend(range(head))
    rows_b.extend(range(head))
    kinds.extend([SAME] * head)
    for tag, i1, i2, j1, j2 in ops:
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        if tag == "equal":
            rows_a.extend(range(i1, i2))
            rows_b.extend(range(j1, j2))
            kinds.extend([SAME] * (i2 - i1))
            continue
        start = len(kinds)
        for k in range(max(i2 - i1, j2 - j1)):
            ia = i1 + k if i1 + k < i2 else -1
            ib = j1 + k if j1 + k < j2 else -1
            emit(ia, ib, CHANGED if ia >= 0 and ib >= 0 else (DELETED if ia >= 0 else INSERTED))
        changes.append((start, len(kinds)))
    rows_a.extend(range(len(a) - tail, len(a)))
    rows_b.extend(range(len(b) - tail, len(b)))
    kinds.extend([SAME] * tail)

    ra, rb, kd = np.asarray(rows_a, np.int64), np.asarray(rows_b, np.int64), np.asarray(kinds, np.int8)
    left_kind = np.where(ra < 0, FILLER, kd).astype(np.int8)
    right_kind = np.where(rb < 0, FILLER, kd).astype(np.int8)
    left_doc = IrDocument(b"\n".join(a[i] if i >= 0 else b"" for i in rows_a) + b"\n")
    right_doc = IrDocument(b"\n".join(b[i] if i >= 0 else b"" for i in rows_b) + b"\n")
    return AlignedDiff(left_doc, right_doc, left_kind, right_kind, ra + 1, rb + 1, changes, truncated)


class IrDiffView(QWidget):
    """Two aligned IR views side by side with synchronized scrolling and change navigation."""

    changeSelected = Signal(int)  # index of the change region shown

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.left = IrTextView(self)
        self.right = IrTextView(self)
        # Elided, whole in their tooltips: as plain labels the summary (~450 px) and the buttons set the diff's
        # minimum width, and opening a diff document squeezed the window's docks to make room for it.
        self.left_title = ElidedLabel("", self, mode=Qt.TextElideMode.ElideMiddle)
        self.right_title = ElidedLabel("", self, mode=Qt.TextElideMode.ElideMiddle)
        self.summary = ElidedLabel("no diff", self)
        prev_btn, next_btn = QToolButton(self), QToolButton(self)
        prev_btn.setText("▲ Previous")  # short: the summary beside them keeps the room
        next_btn.setText("▼ Next")
        prev_btn.setToolTip("Previous change (Shift+F7)")
        next_btn.setToolTip("Next change (F7)")
        prev_btn.clicked.connect(self.previous_change)
        next_btn.clicked.connect(self.next_change)
        bar = QHBoxLayout()
        bar.setContentsMargins(2, 2, 2, 2)
        bar.addWidget(self.summary, 1)
        bar.addWidget(prev_btn)
        bar.addWidget(next_btn)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        for title, view in ((self.left_title, self.left), (self.right_title, self.right)):
            box = QWidget(split)
            v = QVBoxLayout(box)
            v.setContentsMargins(0, 0, 0, 0)
            v.setSpacing(0)
            v.addWidget(title)
            v.addWidget(view, 1)
            split.addWidget(box)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(split, 1)
        self.diff: AlignedDiff | None = None
        self._current = -1
        self._syncing = False
        for a, b in ((self.left, self.right), (self.right, self.left)):
            a.verticalScrollBar().valueChanged.connect(lambda v, b=b: self._sync(b.verticalScrollBar(), v))
            a.horizontalScrollBar().valueChanged.connect(
                lambda v, b=b: self._sync(b.horizontalScrollBar(), v)
            )
            a.foldingChanged.connect(lambda a=a, b=b: self._sync_folds(a, b))
        ctx = Qt.ShortcutContext.WidgetWithChildrenShortcut
        QShortcut(QKeySequence("F7"), self, self.next_change, context=ctx)
        QShortcut(QKeySequence("Shift+F7"), self, self.previous_change, context=ctx)

    def _sync(self, bar, value: int) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            bar.setValue(value)
        finally:
            self._syncing = False

    def _sync_folds(self, src: IrTextView, dst: IrTextView) -> None:
        # rows are aligned, so the same brace lines fold on both sides only when the texts agree; keep
        # both sides unfolded otherwise so rows stay side by side
        if self._syncing:
            return
        self._syncing = True
        try:
            src.unfold_all()
            dst.unfold_all()
        finally:
            self._syncing = False

    def set_texts(
        self, left: str | bytes, right: str | bytes, left_title: str = "", right_title: str = ""
    ) -> None:
        self.set_diff(diff_texts(left, right), left_title, right_title)

    def set_diff(self, diff: AlignedDiff, left_title: str = "", right_title: str = "") -> None:
        self.diff = diff
        self.left.set_document(diff.left)
        self.right.set_document(diff.right)
        self.left.set_line_colors(diff.left_kind, _PALETTE)
        self.right.set_line_colors(diff.right_kind, _PALETTE)
        self.left.set_line_numbers(diff.left_numbers)
        self.right.set_line_numbers(diff.right_numbers)
        self.left_title.setText(left_title)
        self.right_title.setText(right_title)
        removed = int(np.count_nonzero(diff.left_kind == DELETED))
        added = int(np.count_nonzero(diff.right_kind == INSERTED))
        changed = int(np.count_nonzero(diff.left_kind == CHANGED))
        regions = len(diff.changes)
        text = f"{regions} changed region{'s' * (regions != 1)}: {changed} lines changed, {removed} removed, {added} added"
        if not diff.changes:
            text = "the two texts are identical"
        if diff.truncated:
            text += f" (more than {MAX_DIFF_LINES:,} differing lines: shown as one block)"
        self.summary.setText(text)
        self._current = -1

    def current_change(self) -> int:
        return self._current

    def show_change(self, k: int) -> None:
        if self.diff is None or not self.diff.changes:
            return
        k %= len(self.diff.changes)
        self._current = k
        row = self.diff.changes[k][0]
        self.left.go_to_line(row)
        self.right.go_to_line(row)
        self.summary.setText(
            self.summary.text().split("  [")[0] + f"  [change {k + 1}/{len(self.diff.changes)}]"
        )
        self.changeSelected.emit(k)

    def next_change(self) -> None:
        self.show_change(self._current + 1)

    def previous_change(self) -> None:
        self.show_change(self._current - 1 if self._current >= 0 else -1)
