"""Two builds side by side by source line (``iree-lens compare-builds`` in the window): the compile panel's
"Compare builds" runs it on the engine worker for the current compilation (A) and the one chosen beside
"Diff with" (B), with the workbench's function and inputs, and shows this table beside the A/B phase diff.

One row per source line: its op, the dispatch count, code bytes and median time per call in A and B, the
change beyond noise and the outputs' verdict (``engine.trace.build_compare``), slowest first.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLabel, QTableView, QVBoxLayout, QWidget

from app.views.zones_by_source import RowsModel, short_op, sortable_table
from app.views.zones_timeline import format_ns
from engine.trace.build_compare import BuildComparison, LineComparison

_CHANGE_COLOURS = {"slower": "#b03030", "faster": "#2d7d2d", "noise": "#808080"}


def compare_builds_job(
    module_a: str, module_b: str, function: str, inputs: list[str], task=None
) -> BuildComparison:
    """``compare_builds`` with a window's patience: 3 rounds of 5 calls per build (runs on the engine worker)."""
    from engine.cli.compare_builds import compare_builds

    if task is not None:
        task.progress(0.1, f"profiling {Path(module_a).name} and {Path(module_b).name}")
    return compare_builds(module_a, module_b, function, list(inputs), repeat=5, rounds=3)


class BuildCompareModel(RowsModel):
    """Rows of ``LineComparison``; ``Qt.UserRole`` holds numbers for sorting."""

    COLUMNS = ("line", "op", "A n", "A bytes", "A time", "B n", "B bytes", "B time", "change", "outputs")

    def _values(self, r: LineComparison) -> tuple:
        def side(t):
            if t is None:
                return (None, None, None)
            return (len(t.dispatches), t.code_bytes, t.median_ns)

        path, _, line = r.loc.rpartition(":")
        change = "noise" if r.noise else r.change  # "same", with a difference that did not hold up (as the CLI)
        return (f"{Path(path).name}:{line}" if path else r.loc, r.op or "", *side(r.a), *side(r.b), change,
                r.outputs or "")  # fmt: skip

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        r = self.rows[index.row()]
        col = index.column()
        value = self._values(r)[col]
        if role == Qt.ItemDataRole.UserRole:
            return value if value is not None else -1
        if role == Qt.ItemDataRole.DisplayRole:
            if value is None:
                return "-" if col not in (3, 6) else "?"
            if col == 1:
                return short_op(value) if value else "(op unknown)"
            if col in (4, 7):
                return format_ns(value)
            return str(value)
        if role == Qt.ItemDataRole.ForegroundRole and col == 8 and value in _CHANGE_COLOURS:
            return QBrush(QColor(_CHANGE_COLOURS[value]))
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [r.loc + (f"  {r.op}" if r.op else "")]
            for label, t in (("A", r.a), ("B", r.b)):
                if t is not None:
                    lines.append(f"{label}: {format_ns(t.median_ns)} per call (IQR {format_ns(t.spread_ns)}, "
                                 f"{len(t.per_call_ns)} calls): {', '.join(t.dispatches)}")  # fmt: skip
            if r.noise:
                lines.append(f"same: {r.noise}")
            return "\n".join(lines)
        if role == Qt.ItemDataRole.TextAlignmentRole and 2 <= col <= 7:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class BuildCompareTable(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = BuildCompareModel(self)
        self.table, self.proxy = sortable_table(
            self.model, (150, 150), 72, parent=self,
            selection=QTableView.SelectionMode.ExtendedSelection, elide=Qt.TextElideMode.ElideRight,
        )  # fmt: skip
        self.summary = QLabel(
            "Compare builds: the current compilation (A) against the one beside “Diff with” (B)."
        )
        self.summary.setMinimumWidth(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)

    def set_comparison(self, result: BuildComparison, label_a: str = "A", label_b: str = "B") -> None:
        self.model.set_rows(result.lines)
        changed = [r for r in result.lines if r.change in ("slower", "faster")]
        outputs = f"; results B against A: {result.outputs}" if result.outputs else ""
        self.summary.setText(f"{label_a} vs {label_b}: {len(result.lines)} source lines, {len(changed)} changed "
                             f"beyond noise{outputs}")  # fmt: skip
        self.summary.setToolTip("\n".join(result.notes))

    def set_message(self, text: str) -> None:
        self.model.set_rows([])
        self.summary.setText(text)
